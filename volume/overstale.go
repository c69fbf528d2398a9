package volume

import (
	"context"
	"fmt"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// Over-stale stripes: a stripe whose slots missed writes on more than M
// namespaces (a write that failed because too many were away marks them
// too) cannot be rebuilt from the shards the volume trusts, yet once the
// namespaces are back every shard is there to read. A row (the same 4 KiB
// block of every shard) that no failed write touched is one codeword
// across all K+M shards: every block matches its checksum and parity
// verifies, and no mix of two versions of a row does that (two codewords
// differ in at least M+1 blocks, a write changes at most its data block
// and the M parity blocks, and an acknowledged one reached at least one
// of those). A row with one block that the others, agreeing, rebuild has
// that block rebuilt. Reads and Repair of such a stripe prove it this way,
// row by row. A row that proves neither way was changed in part by a write
// that failed: it is unsettled, reads of it fail with class ErrCorrupt
// (OverStaleError), and the stripe keeps its stale marks so that a new
// owner proves it again rather than trust it; Repair leaves it and goes on.

// OverStaleError reports rows of a stripe with more stale slots than
// parity covers whose shards do not form one codeword. Its class is
// blockdev.ErrCorrupt.
type OverStaleError struct {
	Segment, Stripe int64
	Rows            []int64 // 4 KiB blocks of the chunk
}

func (e *OverStaleError) Error() string {
	return fmt.Sprintf("segment %d stripe %d: %d blocks missed writes on more namespaces than parity covers and their shards disagree (a write that failed changed them in part)",
		e.Segment, e.Stripe, len(e.Rows))
}

func (e *OverStaleError) Unwrap() error { return blockdev.ErrCorrupt }

// overStale reports whether stripe id has more than M shards the volume
// does not trust while every slot's namespace is up and no slot is being
// moved: all of its shards can be read and proven.
func (v *Volume) overStale(s *segment, id layout.StripeID) bool {
	stale := 0
	for i, sl := range s.slots {
		if sl.ns.down.Load() || sl.prev.Load() != nil {
			return false
		}
		if !s.usable(i, id.Stripe) {
			stale++
		}
	}
	return stale > v.g.M
}

// proveOverStale reads chunk offsets [lo, hi) of every shard of stripe id
// (lo, hi multiples of 4 KiB) and settles its rows: it returns the shards
// with each provable row made consistent, which blocks it rebuilt (by
// shard and row of the span), and the rows it could not prove (rows of the
// chunk). REQUIRES: stripe lock held, s.io held shared.
func (v *Volume) proveOverStale(ctx context.Context, s *segment, id layout.StripeID, lo, hi int64, b *stripeBufs) (changed [][]bool, bad []int64, err error) {
	n, rows := v.g.N(), (hi-lo)/layout.ChecksumBlock
	good, marked, stale := make([][]bool, n), make([][]bool, n), make([]bool, n)
	for sh := range n {
		stale[sh] = !s.usable(v.g.SlotOf(id.Stripe, sh), id.Stripe)
		b.alloc(sh, hi-lo)
		good[sh], marked[sh] = make([]bool, rows), make([]bool, rows)
	}
	err = v.each(n, func(sh int) error {
		i := v.g.SlotOf(id.Stripe, sh)
		sl := s.slots[i]
		sums := make([]uint32, rows)
		err := sl.dev.ReadAt(ctx, b.shards[sh], v.g.SlotOffset(id)+lo)
		if err == nil && v.g.Checksums {
			err = v.storedSums(ctx, sl, id.Stripe, lo, sums)
		}
		if err != nil {
			return v.shardFailed(s, sl, i, id.Stripe, err)
		}
		for r := range rows {
			blk := b.shards[sh][r*layout.ChecksumBlock : (r+1)*layout.ChecksumBlock]
			good[sh][r] = !v.g.Checksums || blockSum(blk) == sums[r]
			marked[sh][r] = v.g.Checksums && sh >= v.g.K && isMarked(blockSum(blk)^sums[r])
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	changed = make([][]bool, n)
	for sh := range n {
		changed[sh] = make([]bool, rows)
	}
	blocks, present, rowChanged := make([][]byte, n), make([]bool, n), make([]bool, n)
	for r := range rows {
		for sh := range n {
			blocks[sh] = b.shards[sh][r*layout.ChecksumBlock : (r+1)*layout.ChecksumBlock]
			// A stale slot may have missed the checksum of a block it
			// took (written back at a flush it did not see): its block
			// counts if the row proves with it. Not a parity block marked
			// as encoded with an unsettled block as zeros (reprotect): with
			// it the row would prove that block zeros.
			present[sh], rowChanged[sh] = (good[sh][r] || stale[sh]) && !marked[sh][r], false
		}
		ok := v.settleOverStaleRow(blocks, present, rowChanged)
		for sh := range n {
			changed[sh][r] = ok && (rowChanged[sh] || !good[sh][r])
		}
		if !ok {
			bad = append(bad, lo/layout.ChecksumBlock+r)
		}
	}
	return changed, bad, nil
}

// settleOverStaleRow makes the blocks of one row consistent when they
// prove: every present block agrees with the others and the missing ones
// are rebuilt, or exactly one present block disagrees and is rebuilt. It
// marks the shards it rewrote in changed and reports whether the row
// proved.
func (v *Volume) settleOverStaleRow(blocks [][]byte, present, changed []bool) bool {
	without := -1
	if !v.rowAgrees(blocks, present, -1) {
		if without = v.staleShard(blocks, present); without < 0 {
			return false
		}
	}
	for sh := range blocks {
		if present[sh] && sh != without {
			continue
		}
		b := v.rebuildWithout(blocks, present, sh)
		if b == nil {
			return false
		}
		copy(blocks[sh], b)
		changed[sh] = true
	}
	return true
}

// repairOverStale is rebuildChunk for an over-stale stripe: it proves the
// rows of the whole chunk and writes the blocks it rebuilt back to their
// shards. It fails with an *OverStaleError when rows are left unsettled
// (the rows that proved are written all the same). REQUIRES: stripe lock
// held, s.io held shared.
func (v *Volume) repairOverStale(ctx context.Context, s *segment, id layout.StripeID) error {
	b := &stripeBufs{v: v, shards: make([][]byte, v.g.N())}
	defer b.release()
	changed, bad, err := v.proveOverStale(ctx, s, id, 0, v.g.Chunk, b)
	if err != nil {
		return err
	}
	for sh, rows := range changed {
		for r, c := range rows {
			if c {
				if err := v.rewriteBlock(ctx, s, id, sh, int64(r), b.shards[sh]); err != nil {
					return err
				}
			}
		}
	}
	if len(bad) > 0 {
		return &OverStaleError{Segment: s.id, Stripe: id.Stripe, Rows: bad}
	}
	return nil
}

// readOverStale reads sio from an over-stale stripe, proving the rows it
// covers; it writes nothing. REQUIRES: stripe lock held, s.io held shared.
func (v *Volume) readOverStale(ctx context.Context, s *segment, sio layout.StripeIO, p []byte, base int64) error {
	lo, hi := sio.Span()
	lo, hi = lo/layout.ChecksumBlock*layout.ChecksumBlock, (hi+layout.ChecksumBlock-1)/layout.ChecksumBlock*layout.ChecksumBlock
	b := &stripeBufs{v: v, shards: make([][]byte, v.g.N())}
	defer b.release()
	_, bad, err := v.proveOverStale(ctx, s, sio.ID, lo, hi, b)
	if err != nil {
		return err
	}
	for _, pc := range sio.Pieces {
		for _, r := range bad {
			if r*layout.ChecksumBlock < pc.Off+pc.Len && (r+1)*layout.ChecksumBlock > pc.Off {
				return &OverStaleError{Segment: s.id, Stripe: sio.ID.Stripe, Rows: bad}
			}
		}
	}
	for _, pc := range sio.Pieces {
		copy(p[pc.Buf-base:pc.Buf-base+pc.Len], b.shards[pc.Shard][pc.Off-lo:pc.Off-lo+pc.Len])
	}
	return nil
}

// rewriteBlock writes block r of chunk (shard sh of stripe id) back to
// its slot with its checksum.
func (v *Volume) rewriteBlock(ctx context.Context, s *segment, id layout.StripeID, sh int, r int64, chunk []byte) error {
	i := v.g.SlotOf(id.Stripe, sh)
	blk := chunk[r*layout.ChecksumBlock : (r+1)*layout.ChecksumBlock]
	var sums []uint32
	if v.g.Checksums {
		sums = blockSums(nil, blk)
	}
	if err := v.slotWrite(ctx, s.slots[i], id.Stripe, r*layout.ChecksumBlock, blk, sums, false); err != nil {
		return v.shardFailed(s, s.slots[i], i, id.Stripe, err)
	}
	return nil
}
