package volume

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/nvstripe/nvstripe/blockdev"
)

// SlotRef names one slot: a namespace and the slot's index in it (its byte
// offset in the namespace is Slot*SlotSize).
type SlotRef struct {
	NS   string
	Slot int64
}

// DeviceSet resolves namespace ids to devices. The volume does not own the
// devices: it never closes them.
//
// The volume calls Device with the context of the IO that first needs the
// namespace and holds none of its locks meanwhile: a namespace that is slow
// to resolve (a target being dialled) delays only the IO that needs it, and
// an implementation that waits should honour ctx. Calls may be concurrent,
// for one id too; the volume keeps the first device it gets for an id.
type DeviceSet interface {
	Device(ctx context.Context, ns string) (blockdev.Device, error)
}

// DeviceMap is a DeviceSet over a fixed map.
type DeviceMap map[string]blockdev.Device

// Device returns the device of ns or an ErrUnavailable error.
func (m DeviceMap) Device(_ context.Context, ns string) (blockdev.Device, error) {
	d, ok := m[ns]
	if !ok {
		return nil, fmt.Errorf("namespace %q: no device: %w", ns, blockdev.ErrUnavailable)
	}
	return d, nil
}

// Allocator places segments (thin allocation). Implementations: MemAllocator
// here, the etcd-backed one in meta.
type Allocator interface {
	// Lookup returns the slots of segment seg, or ok=false when the segment is
	// not allocated.
	Lookup(ctx context.Context, seg int64) (slots []SlotRef, ok bool, err error)
	// Allocate places segment seg on K+M slots and records it atomically. It is
	// idempotent: an allocated segment returns its existing slots.
	Allocate(ctx context.Context, seg int64) ([]SlotRef, error)
	// Free releases the segment's slots.
	Free(ctx context.Context, seg int64) error
}

// DirtyLog records which segments may have data and parity out of step (a
// write was in flight). A segment is marked dirty before its first write and
// clean after a flush with no write in flight; after a crash, dirty segments
// get their parity recomputed (Volume.Recover).
type DirtyLog interface {
	MarkDirty(ctx context.Context, seg int64) error
	MarkClean(ctx context.Context, segs []int64) error
	Dirty(ctx context.Context) ([]int64, error)
}

// MemDirtyLog is an in-memory DirtyLog. It survives a simulated crash of the
// devices, as an etcd-backed one survives a real one.
type MemDirtyLog struct {
	mu    sync.Mutex
	dirty map[int64]bool
}

var _ DirtyLog = (*MemDirtyLog)(nil)

// NewMemDirtyLog returns an empty in-memory dirty log.
func NewMemDirtyLog() *MemDirtyLog { return &MemDirtyLog{dirty: map[int64]bool{}} }

func (l *MemDirtyLog) MarkDirty(_ context.Context, seg int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dirty[seg] = true
	return nil
}

func (l *MemDirtyLog) MarkClean(_ context.Context, segs []int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range segs {
		delete(l.dirty, s)
	}
	return nil
}

func (l *MemDirtyLog) Dirty(context.Context) ([]int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int64, 0, len(l.dirty))
	for s := range l.dirty {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

type nopDirtyLog struct{}

func (nopDirtyLog) MarkDirty(context.Context, int64) error   { return nil }
func (nopDirtyLog) MarkClean(context.Context, []int64) error { return nil }
func (nopDirtyLog) Dirty(context.Context) ([]int64, error)   { return nil, nil }

// EventListener receives what the volume notices. Every field is optional;
// callbacks run on the IO path and must not block.
type EventListener struct {
	// Degraded is called when an IO had to work around missing shards.
	Degraded func(DegradedInfo)
	// Hedged is called when a degraded read, its K shard reads not all
	// back after Options.HedgeAfter (or one failed), reads one more shard
	// (hedge.go).
	Hedged func(HedgeInfo)
	// Corruption is called when a shard returned data marked corrupt.
	Corruption func(ShardInfo)
	// ShardError is called when a shard's device failed an IO.
	ShardError func(ShardInfo)
	// Checksum is called once per shard of a stripe in which a heal (a
	// read's, a write's, a scrub's or a resync's) found blocks that did
	// not match their checksums, saying how many it healed.
	Checksum func(ChecksumInfo)
	// Unsettled is called for each block a recovery could not settle
	// (UnsettledError) and each a rebuild carried over unsettled: reads of
	// it fail with class ErrCorrupt until Settle or a write of its stripe.
	Unsettled func(UnsettledBlock)
}

// DegradedInfo describes one degraded stripe IO.
type DegradedInfo struct {
	Op      string // "read", "write", "trim"
	Segment int64
	Stripe  int64
	Missing []string // namespaces of the missing shards
}

// HedgeInfo describes one hedged stripe read.
type HedgeInfo struct {
	Segment int64
	Stripe  int64
	Slow    []string // namespaces of the reads not back (or failed) when the extra one started
	Extra   string   // namespace of the extra read
}

// ShardInfo names a shard and what happened to it.
type ShardInfo struct {
	NS      string
	Segment int64
	Slot    int
	Err     error
}

func (e EventListener) degraded(d DegradedInfo)    { emit(e.Degraded, d) }
func (e EventListener) hedged(h HedgeInfo)         { emit(e.Hedged, h) }
func (e EventListener) corruption(s ShardInfo)     { emit(e.Corruption, s) }
func (e EventListener) unsettled(b UnsettledBlock) { emit(e.Unsettled, b) }
func (e EventListener) shardError(s ShardInfo)     { emit(e.ShardError, s) }

// emit calls the hook f with v, when there is one.
func emit[T any](f func(T), v T) {
	if f != nil {
		f(v)
	}
}

// LoggingListener returns a listener that reports every event through logf.
func LoggingListener(logf func(format string, args ...any)) EventListener {
	return EventListener{
		Degraded: func(d DegradedInfo) {
			logf("degraded %s: segment %d stripe %d, missing %v", d.Op, d.Segment, d.Stripe, d.Missing)
		},
		Hedged: func(h HedgeInfo) {
			logf("hedged read: segment %d stripe %d, %v slow, reading %s too", h.Segment, h.Stripe, h.Slow, h.Extra)
		},
		Corruption: func(s ShardInfo) {
			logf("corruption: namespace %s segment %d slot %d: %v", s.NS, s.Segment, s.Slot, s.Err)
		},
		ShardError: func(s ShardInfo) {
			logf("shard error: namespace %s segment %d slot %d: %v", s.NS, s.Segment, s.Slot, s.Err)
		},
		Checksum: func(c ChecksumInfo) {
			logf("checksum mismatch: namespace %s offset %d (segment %d slot %d stripe %d): %d blocks bad, %d healed, %d kept as torn writes, %d in a segment not yet resynced",
				c.NS, c.Offset, c.Segment, c.Slot, c.Stripe, c.Blocks, c.Healed, c.Torn, c.Unsettled)
		},
		Unsettled: func(b UnsettledBlock) {
			logf("unsettled block at volume offset %d (segment %d stripe %d shard %d): lost in a crash mid-write and a namespace loss; reads of it fail as corrupt until `nvstripe volume settle` zeroes it or its stripe is written whole",
				b.Offset, b.Segment, b.Stripe, b.Shard)
		},
	}
}

// TeeListener returns a listener that calls a and then b.
func TeeListener(a, b EventListener) EventListener {
	return EventListener{
		Degraded:   func(d DegradedInfo) { a.degraded(d); b.degraded(d) },
		Hedged:     func(h HedgeInfo) { a.hedged(h); b.hedged(h) },
		Corruption: func(s ShardInfo) { a.corruption(s); b.corruption(s) },
		ShardError: func(s ShardInfo) { a.shardError(s); b.shardError(s) },
		Checksum: func(c ChecksumInfo) {
			for _, f := range []func(ChecksumInfo){a.Checksum, b.Checksum} {
				if f != nil {
					f(c)
				}
			}
		},
		Unsettled: func(u UnsettledBlock) { a.unsettled(u); b.unsettled(u) },
	}
}
