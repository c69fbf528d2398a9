package volume

import (
	"bytes"
	"context"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// TestRepairGoesOnPastAStripeItCannotRebuild: slot 0 of a segment
// missed stripe 0, which cannot be rebuilt (two other shards of a row do
// not match their checksums: three bad with M=2); slot 5 missed stripe 1,
// which can. Repair must rebuild slot 5's stripe and return slot 0's
// error, not stop at the first stripe it cannot rebuild: the owner runs
// Repair every 10 s and it fails the same way each time, so every stale
// slot after that stripe stays stale for good (the campaign, seed 24110,
// was left with 7 stale slots while only three stripes failed).
func TestRepairGoesOnPastAStripeItCannotRebuild(t *testing.T) {
	ctx := context.Background()
	g := pplLayouts[1]
	g.Seed = 1
	r := newRig(t, g, g.SegmentData(), rigOptions{crashable: true})
	mustWriteFlushed(t, r.vol, testutil.Pattern(int(g.SegmentData()), 1), 0)
	refs, _, err := r.alloc.Lookup(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range []int{1, 2} { // row 0 of stripe 0: bad in two more shards
		ref := refs[g.SlotOf(0, sh)]
		if err := r.mems[r.index(ref.NS)].WriteAt(ctx, bytes.Repeat([]byte{0xee}, 4096), ref.Slot*g.SlotSize); err != nil {
			t.Fatal(err)
		}
	}
	missed := []StaleSlot{
		{Segment: 0, Slot: 0, Ref: refs[0], Stripes: []StripeRange{{From: 0, To: 1}}},
		{Segment: 0, Slot: 5, Ref: refs[5], Stripes: []StripeRange{{From: 1, To: 2}}},
	}
	for _, m := range missed {
		if err := r.stale.MarkStale(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	r.reopen(t, r.crash(t, ctx, func(int) bool { return true }))
	if _, err := r.vol.Repair(ctx); err == nil {
		t.Fatal("setup: Repair rebuilt a stripe with three bad shards of 4+2")
	}
	left, err := r.stale.Stale(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range left {
		if m.Slot == 5 {
			t.Fatalf("slot 5 still misses stripes %v: Repair stopped at slot 0's stripe it cannot rebuild", m.Stripes)
		}
	}
}
