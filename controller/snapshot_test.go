package controller

import (
	"context"
	"testing"

	"github.com/nvstripe/nvstripe/meta"
)

// TestHealthCountsStaleSlots: a slot marked stale (it missed writes) costs
// redundancy like a slot on a namespace out of service, until its mark is
// cleared; a mark for a location the slot no longer has is ignored.
func TestHealthCountsStaleSlots(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, metaCluster(t, 6, 2))
	owner, err := store.Acquire(ctx, "v", meta.OwnerOptions{Holder: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Release(ctx)
	vm, err := store.VolumeMap(ctx, "v", owner)
	if err != nil {
		t.Fatal(err)
	}
	segs, _, err := vm.Segments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	health := func() VolumeHealth {
		t.Helper()
		snap, err := LoadSnapshot(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		return snap.Health()[0]
	}
	if h := health(); h.Status() != "healthy" || h.Stale != 0 {
		t.Fatalf("before any mark: %+v (%s)", h, h.Status())
	}
	mark := func(seg int64, idx int, ref meta.SlotRef) {
		t.Helper()
		if err := vm.MarkStale(ctx, seg, idx, ref); err != nil {
			t.Fatal(err)
		}
	}
	mark(0, 1, segs[0].Slots[1])
	mark(0, 4, segs[0].Slots[4])
	mark(1, 2, meta.SlotRef{NS: segs[1].Slots[2].NS, Slot: segs[1].Slots[2].Slot + 7}) // an old location
	h := health()
	if h.Lost != 2 || h.Degraded != 1 || h.Stale != 2 || h.Status() != "at risk" {
		t.Fatalf("with two stale slots in segment 0: %+v (%s), want lost 2, degraded 1, stale 2, at risk", h, h.Status())
	}
	if err := vm.ClearStale(ctx, 0, 4, segs[0].Slots[4]); err != nil {
		t.Fatal(err)
	}
	if h := health(); h.Lost != 1 || h.Stale != 1 || h.Status() != "degraded by 1" {
		t.Fatalf("after one mark cleared: %+v (%s)", h, h.Status())
	}
}
