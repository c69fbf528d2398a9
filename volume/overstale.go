package volume

import (
	"context"
	"fmt"
	"slices"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// Over-stale stripes: a stripe whose slots missed writes on more than M
// namespaces (a write that failed because too many were away marks them
// too) cannot be rebuilt from the shards the volume trusts, yet once the
// namespaces are back every shard is there to read. Reads and Repair of
// such a stripe read all K+M shards and settle it row by row (a row: the
// same 4 KiB block of every shard), or leave a row unsettled: reads of it
// fail with class ErrCorrupt (OverStaleError), and the stripe keeps its
// stale marks so that a new owner proves it again rather than trust it;
// Repair leaves it and goes on.
//
// What a row's blocks prove. A block of a slot the volume trusts (not
// stale) that matches its checksum holds the latest value of that block:
// every write reached the slot or marked it. A stale slot stopped taking
// writes when it was marked and may hold any older version of its block;
// it counts whatever its checksum (it may have missed the checksum of a
// block it took). Over-stale, fewer than K slots are trusted, so no row is
// known from trusted blocks alone. A row is settled when:
//
//   - every present block agrees (one codeword): the data is kept as
//     read, each block bytes that were written there, and a missing
//     parity block is encoded from it;
//   - all but one parity block agree: that one is encoded from the data
//     as read (parity has nothing to vouch for);
//   - all but one data block x agree (x disagrees, or is missing), and
//     every other data block of the row is trusted: those hold the data
//     as it is now, so the M parity blocks (all stale: at most K-1 slots
//     are trusted) agreeing on x make it the value the latest write left
//     in it, unless parity blocks written for other versions of the data
//     happen to agree (Limits). With M = 1 nothing checks x: not settled.
//
// Agreement alone is not enough to rebuild a data block from other stale
// ones. Rows of a write that failed part way, or of writes some stale
// slots missed, mix versions; a mix of two versions is a codeword only
// where the difference of the versions, cut to the blocks that hold the
// newer one, is a codeword itself. For data that differs unalike that
// takes bytes to collide. A write that changes several data blocks alike
// (each new block its old one xor one constant, one repeated block over
// another, a trim of such blocks) changes every block of the row, parity
// included, by a multiple (in the code's field) of one delta, and some
// mixes of its two versions agree on all blocks but one on a codeword
// neither wrote: the block left out, rebuilt, read bytes nobody wrote
// (TestOverStaleTornAlikeWrite: 4 of the 20 ways a full-stripe write can
// fail on three of six namespaces). Checksums as read do not tell such a
// mix either: every block of it may match its own (the namespaces that
// failed kept the old version whole). Such rows are unsettled. The write log does not vouch here: a stripe's records
// live on its parity slots, and where a data block is rebuilt those are
// all stale (their rings are not trusted, see scanLog); a record allows
// the values of one flush epoch only, older than the data where a
// whole-stripe trim (not logged) came later; and reading the log areas
// would cost every read of the stripe M of them.
//
// Limits: stale parity blocks of two older versions can still agree on a
// wrong x when the versions' differences, weighted by each parity row's
// coefficients, coincide (two failed writes of alike blocks whose deltas
// stand in the ratio of those coefficients); and a row whose stale data
// blocks hold an older version that agrees as a whole with the rest is
// read as that version.

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
	blocks, present, trusted, rowChanged := make([][]byte, n), make([]bool, n), make([]bool, n), make([]bool, n)
	for r := range rows {
		for sh := range n {
			blocks[sh] = b.shards[sh][r*layout.ChecksumBlock : (r+1)*layout.ChecksumBlock]
			// A stale slot may have missed the checksum of a block it
			// took (written back at a flush it did not see): its block
			// counts if the row proves with it. Not a parity block marked
			// as encoded with an unsettled block as zeros (reprotect): with
			// it the row would prove that block zeros.
			present[sh], rowChanged[sh] = (good[sh][r] || stale[sh]) && !marked[sh][r], false
			trusted[sh] = good[sh][r] && !stale[sh]
		}
		ok := v.settleOverStaleRow(blocks, present, trusted, rowChanged)
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
// are rebuilt, or exactly one present block disagrees and is rebuilt
// from the others; and each data block rebuilt is vouched for
// (overStaleVouched). trusted marks the blocks of slots the volume trusts
// that match their checksums. It marks the shards it rewrote in changed
// and reports whether the row proved.
func (v *Volume) settleOverStaleRow(blocks [][]byte, present, trusted, changed []bool) bool {
	without := -1
	if !v.rowAgrees(blocks, present, -1) {
		if without = v.staleShard(blocks, present); without < 0 {
			return false
		}
	}
	from := slices.Clone(present)
	if without >= 0 {
		from[without] = false
	}
	rebuilt := make([][]byte, len(blocks))
	for sh := range blocks {
		if from[sh] {
			continue
		}
		rebuilt[sh] = v.rebuildWithout(blocks, from, sh)
		if rebuilt[sh] == nil || !v.overStaleVouched(trusted, sh) {
			return false
		}
	}
	for sh, b := range rebuilt {
		if b != nil {
			copy(blocks[sh], b)
			changed[sh] = true
		}
	}
	return true
}

// overStaleVouched reports whether shard x of a row of an over-stale
// stripe may be rebuilt from the others (see the top of the file): a
// parity block always (it encodes the data as settled), a data block only
// when every other data block of the row is trusted.
func (v *Volume) overStaleVouched(trusted []bool, x int) bool {
	if x >= v.g.K {
		return true
	}
	for sh := range v.g.K {
		if sh != x && !trusted[sh] {
			return false
		}
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
