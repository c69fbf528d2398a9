package volume

import (
	"context"
	"fmt"
	"slices"

	"github.com/nvstripe/nvstripe/volume/layout"
)

// UnsettledBlock is a 4 KiB block of the volume that a recovery could not
// settle (UnsettledError): reads of it fail with class ErrCorrupt until a
// write of its whole stripe, or Settle.
type UnsettledBlock struct {
	Offset  int64 // byte offset in the volume
	Segment int64
	Stripe  int64
	Shard   int
}

// Unsettled lists the volume's unsettled blocks in offset order.
func (v *Volume) Unsettled() []UnsettledBlock {
	p := &v.poisoned
	if !p.any.Load() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []UnsettledBlock
	for k, rows := range p.rows {
		for _, r := range rows {
			off := k.id.Segment*v.g.SegmentData() + k.id.Stripe*v.g.StripeData() + int64(k.shard)*v.g.Chunk + r*layout.ChecksumBlock
			out = append(out, UnsettledBlock{Offset: off, Segment: k.id.Segment, Stripe: k.id.Stripe, Shard: k.shard})
		}
	}
	slices.SortFunc(out, func(a, b UnsettledBlock) int { return int(min(max(a.Offset-b.Offset, -1), 1)) })
	return out
}

// stripeUnsettled reports whether stripe id holds unsettled blocks.
func (v *Volume) stripeUnsettled(id layout.StripeID) bool {
	return v.unsettled(id, -1, 0, v.g.Chunk) != nil
}

// unsettledRow reports whether row r of stripe id holds an unsettled
// block (of any data shard): its parity blocks were poisoned with it.
func (v *Volume) unsettledRow(id layout.StripeID, r int64) bool {
	return v.unsettled(id, -1, r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock) != nil
}

// rebuildUnsettled is rebuildChunk for a stripe with unsettled rows: the
// rebuild carries them over instead of failing, so that a move or a
// rebuild of any slot of the stripe finishes and the segment gets its
// redundancy back. Each block of slot i's chunk is the slot's own (its
// old location during a move) when that matches its checksum and is not
// unsettled; else, in a settled row, it is rebuilt from K blocks of the
// row that match theirs (proved first, as chunkFor does); else it is
// carried over unsettled: written blank, zeros with a checksum-area word
// of zero, which in format 4 no block matches and no recovery takes for a
// torn write (misplaced), so reads of it fail with class ErrCorrupt, also
// after a reopen, and the poisoned parity of the row keeps the rest from
// reconstructing it. A data block carried over is recorded unsettled
// (Unsettled lists it; Settle zeroes it). Format 3 has no such blank (a
// zero block's checksum is zero there, so the blank would read as zeros):
// its rebuild still fails with class ErrCorrupt until the stripe is
// written whole. REQUIRES: stripe lock held, s.io held shared.
func (v *Volume) rebuildUnsettled(ctx context.Context, s *segment, i int, id layout.StripeID) error {
	t, sh := id.Stripe, v.g.ShardIn(id.Stripe, i)
	if v.g.Seed == 0 {
		if err := v.unsettled(id, -1, 0, v.g.Chunk); err != nil {
			return fmt.Errorf("a volume without checksum tags (format 3) cannot carry an unsettled block to a new slot; write its stripe whole: %w", err)
		}
	}
	usable := v.usableShards(s, id)
	img, err := v.readImage(ctx, s, id, usable)
	if err != nil {
		return err
	}
	defer img.bufs.release()
	rows := v.g.BlocksPerChunk()
	chunk := make([]byte, v.g.Chunk)
	sums := make([]uint32, rows)
	tags := v.g.SlotTags(s.id, i)
	var carried []int64
	for r := int64(0); r < rows; r++ {
		lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
		out := chunk[lo:hi]
		own := usable[sh] && blockSum(img.bufs.shards[sh][lo:hi]) == img.sums[sh][r] && v.unsettled(id, sh, lo, hi) == nil
		switch {
		case own:
			copy(out, img.bufs.shards[sh][lo:hi])
		case !v.unsettledRow(id, r):
			if err := v.proveSpan(ctx, s, id, lo, hi); err != nil {
				return err
			}
			if !v.solveClean(img, usable, sh, r, out) {
				return fmt.Errorf("segment %d stripe %d shard %d block %d: fewer than %d blocks of its row match their checksums: %w",
					s.id, t, sh, r, v.g.K, v.stripeError(s, id, usable))
			}
		default:
			clear(out)
			sums[r] = tags.Of(t*rows + r) // stored as zero: blank
			if sh < v.g.K {
				carried = append(carried, r)
			}
			continue
		}
		sums[r] = blockSum(out)
	}
	if err := v.slotWrite(ctx, s.slots[i], t, 0, chunk, sums, false); err != nil {
		return v.shardFailed(s, s.slots[i], i, t, err)
	}
	if len(carried) > 0 {
		v.poisonMore(id, sh, carried)
	}
	return nil
}

// poisonMore adds rows to the unsettled blocks of shard of stripe id.
func (v *Volume) poisonMore(id layout.StripeID, shard int, rows []int64) {
	p := &v.poisoned
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rows == nil {
		p.rows = map[poisonKey][]int64{}
	}
	k := poisonKey{id, shard}
	p.rows[k] = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(p.rows[k]), rows...))))
	p.any.Store(true)
}
