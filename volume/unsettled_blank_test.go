package volume

import (
	"context"
	"fmt"
	"testing"

	"github.com/nvstripe/nvstripe/volume/layout"
)

// zeroRowHole is crashWithLostOn over a volume flushed as zeros: the
// blocks the workload does not write stay zeros, so the rows it wrote one
// block of hold zeros in their other data blocks.
func zeroRowHole(t *testing.T, g layout.Geometry, lost int, seed int64) *hole {
	o := rigOptions{crashable: true, namespaces: g.N() + 1, slots: 8}
	return crashFilled(t, g, lost, seed, o, func(n int) []byte { return make([]byte, n) })
}

// zeroRowUnsettled returns a recovered zeroRowHole with an unsettled
// block whose row's other data blocks read as zeros, and that block. It
// tries the crash known to leave one first (seed 15, namespace 1 lost),
// then the others: the search is slow under the race detector.
func zeroRowUnsettled(t *testing.T, g layout.Geometry) (*hole, UnsettledBlock) {
	tries := [][2]int64{{15, 1}}
	for seed := int64(1); seed <= 20; seed++ {
		for lost := range int64(g.N()) {
			tries = append(tries, [2]int64{seed, lost})
		}
	}
	for _, try := range tries {
		h := zeroRowHole(t, g, int(try[1]), try[0])
		h.r.reopen(t, h.devs)
		if _, err := h.r.vol.Recover(context.Background()); err != nil {
			t.Fatalf("recover: %v", err)
		}
		for _, b := range h.r.vol.Unsettled() {
			if rowOthersZero(h, b) {
				return h, b
			}
		}
	}
	t.Fatal("no crash left an unsettled block in a row of zeros")
	return nil, UnsettledBlock{}
}

// rowOthersZero reports whether the other data blocks of b's row read
// as zeros (not written since the volume was flushed as zeros, or their
// writes lost in the crash).
func rowOthersZero(h *hole, b UnsettledBlock) bool {
	g := h.r.g
	row := b.Offset - (b.Segment*g.SegmentData() + b.Stripe*g.StripeData() + int64(b.Shard)*g.Chunk)
	got := make([]byte, 4096)
	for sh := 0; sh < g.K; sh++ {
		off := b.Segment*g.SegmentData() + b.Stripe*g.StripeData() + int64(sh)*g.Chunk + row
		if sh == b.Shard {
			continue
		}
		if err := h.r.vol.ReadAt(context.Background(), got, off); err != nil || !allZero(got) {
			return false
		}
	}
	return true
}

// TestBlankNeverReadsAsZeros: an unsettled block whose row's other data
// blocks hold zeros is carried over blank by the move of its slot, and
// the moves of the row's parity slots carry the poisoned parity over
// blank too: the row is then zeros in every shard, blanks among them,
// which is also what an allocation cut short by a crash leaves. A new
// owner's recovery resyncs the segment (still dirty from the crash). The
// block must still read as corrupt, to the owner and to a read-only
// volume, with and without the record of blanks, also when the record
// says it lists not every blank (More) and so misses this one: its last
// write held data, and zeros are not it. Before, the resync took the row
// for a never-written one (blankRow) and wrote the blank back as zeros
// with a good checksum, and the owner, though it listed the block
// unsettled, and every reader read zeros, no error (what the fault
// campaign's verify read after an owner's restart).
func TestBlankNeverReadsAsZeros(t *testing.T) {
	for _, overflowed := range []bool{false, true} {
		ctx := context.Background()
		h, b := zeroRowUnsettled(t, unsettledLayout)
		r := h.r
		want := unsettledOffsets(r.vol)
		moveLost(t, h)
		for sh := r.g.K; sh < r.g.N(); sh++ {
			moveSlotTo(t, r, b.Segment, r.g.SlotOf(b.Stripe, sh))
		}
		checkUnsettled(t, h, want, "after the moves")
		if overflowed {
			// A record that ran out of room: it lists other blocks, or
			// none, and says there are more.
			if err := r.unsettled.SetUnsettled(ctx, UnsettledSegment{Segment: b.Segment, More: true}); err != nil {
				t.Fatal(err)
			}
		}
		when := fmt.Sprintf("(record overflowed: %v)", overflowed)
		newOwner(t, h)
		checkUnsettled(t, h, want, "after a new owner's recovery "+when)
		owner := r.vol
		for _, follow := range []bool{true, false} {
			r.epoch++
			v, err := New(Options{Geometry: r.g, Size: owner.Size(), Devices: h.devs, Alloc: r.alloc, Dirty: r.dirty, Stale: r.stale, Unsettled: r.unsettled, ReadOnly: true, LogEpoch: r.epoch})
			if err != nil {
				t.Fatal(err)
			}
			if follow {
				if err := v.FollowUnsettled(ctx); err != nil {
					t.Fatal(err)
				}
			}
			r.vol = v
			checkUnsettled(t, h, want, fmt.Sprintf("a reader (record loaded: %v) %s", follow, when))
			r.vol = owner
		}
	}
}
