package volume

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
)

// TestRepairAfterTwoLostTornSums: on 4+2 with a write log, stripe 0 is
// flushed with A, then one block of data shard 0 is rewritten with B and
// the owner stops before that write's data reached data shard 0 and both
// parities, while its checksum pages did (a checksum page can land before
// its data): the row holds A everywhere, consistent, with the checksums of
// B on shards 0, 4 and 5. The next owner opens with data shards 0 and 2
// unreachable (their slots stale), so the recovery cannot settle the
// stripe; the row it solves from the record is consistent and is not
// poisoned. When the two namespaces are back, Repair must rebuild their
// slots: the survivors rebuild shard 0 as A, a version the record allows,
// so the row is sound. The campaign left four stripes in exactly this
// state (one row: a data block and both parities not matching their
// checksums, all six blocks one codeword; seeds 24110 and 25022): stale
// slots that stayed stale with nothing moving, every Repair failing with a
// checksum mismatch on a parity, the segment dirty for good.
func TestRepairAfterTwoLostTornSums(t *testing.T) {
	ctx := context.Background()
	g := pplLayouts[1]
	g.Seed = 1
	r := newRig(t, g, g.SegmentData(), rigOptions{crashable: true})
	a := testutil.Pattern(int(g.StripeData()), 1)
	mustWriteFlushed(t, r.vol, a, 0)
	refs, _, err := r.alloc.Lookup(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	old := map[int][]byte{} // row 0 of shards 0, 4 and 5 as A left it
	for _, sh := range []int{0, g.K, g.K + 1} {
		ref := refs[g.SlotOf(0, sh)]
		old[sh] = make([]byte, 4096)
		if err := r.mems[r.index(ref.NS)].ReadAt(ctx, old[sh], ref.Slot*g.SlotSize); err != nil {
			t.Fatal(err)
		}
	}
	b := testutil.Pattern(4096, 2)
	mustWriteFlushed(t, r.vol, b, 0)
	for sh, blk := range old { // B's data never landed there; its checksums did
		ref := refs[g.SlotOf(0, sh)]
		if err := r.mems[r.index(ref.NS)].WriteAt(ctx, blk, ref.Slot*g.SlotSize); err != nil {
			t.Fatal(err)
		}
	}
	crashed := r.crash(t, ctx, func(int) bool { return true })
	r.recoverLosing(t, crashed, refs, 0, 2)
	if _, err := r.vol.Repair(ctx); err != nil {
		t.Fatalf("repair once the lost namespaces are back: %v", err)
	}
	got := make([]byte, 4096)
	err = r.vol.ReadAt(ctx, got, 0)
	switch {
	case err != nil && !errors.Is(err, blockdev.ErrCorrupt):
		t.Fatalf("reading block 0: %v", err)
	case err == nil && !bytes.Equal(got, a[:4096]) && !bytes.Equal(got, b):
		t.Fatal("block 0 reads bytes never written there")
	}
	if r.vol.NeedsRepair() {
		t.Fatal("slots still stale after a Repair that returned no error")
	}
}
