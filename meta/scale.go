package meta

// DefaultSlotSize is the slot size of a cluster initialized without one:
// 4 GiB.
//
// Why 4 GiB. etcd holds a few million keys well; its backend quota is 2 GiB
// by default (8 GiB is the suggested maximum), every key also costs memory
// in its index, and the database must leave room for MVCC history between
// compactions and for bbolt's free pages. The key count of nvstripe grows
// with capacity / slot size: one segment record per k+m slots (dirty marks,
// owners and namespaces are few). Measured (BenchmarkSegmentRecordSize): a
// 4+2 segment record with production-like names is 296 bytes of key and
// value and adds 290-345 bytes to etcd's database (in use and file size;
// the table uses 345).
//
// For 100 hosts x 16 namespaces x 7.68 TB fully allocated (12.3 PB raw):
//
//	slot    k+m=6 (4+2)              k+m=3 (2+1)
//	256MiB  7.63M keys, 2.45 GiB     15.3M keys, 4.90 GiB   over the quota
//	1GiB    1.91M keys, 0.61 GiB     3.81M keys, 1.23 GiB   fits; 2+1 nears the quota
//	2GiB    0.95M keys, 0.31 GiB     1.91M keys, 0.61 GiB
//	4GiB    0.48M keys, 0.15 GiB     0.95M keys, 0.31 GiB   default
//	8GiB    0.24M keys, 0.08 GiB     0.48M keys, 0.15 GiB
//
// At 4 GiB even the narrowest protected layout stays under a million keys
// and a sixth of the default quota, leaving room for bbolt slack,
// history and growth; a namespace's allocation bitmap is 224 bytes (an
// allocation transaction rewrites about 2 KB of bitmaps for 4+2), and a
// 7.68 TB namespace still has 1,787 slots, so placement and rebalancing keep
// a granularity of 0.06%. The price is the thin-allocation unit: the first
// write into a 4+2 segment reserves 4 x 4 GiB of data space, fine for the
// large checkpoint and dataset volumes nvstripe is for. Small clusters and
// tests choose smaller slots with `cluster init --slot-size`.
const DefaultSlotSize = 4 << 30
