package controller

import (
	"slices"
	"testing"

	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/meta"
)

// TestLeakedSlots counts a segment's slots, a move's reserved destination
// before its commit and its old slot after it, and reports only the
// namespaces whose allocation count differs.
func TestLeakedSlots(t *testing.T) {
	snap := &Snapshot{
		State: decide.State{Namespaces: []decide.Namespace{{ID: "a", Used: 2}, {ID: "b", Used: 2}, {ID: "c", Used: 1}, {ID: "d", Used: 0}}},
		Segments: map[string]map[int64]*meta.SegmentRecord{"v": {
			0: {Slots: []meta.SlotRef{{NS: "a", Slot: 1}, {NS: "b", Slot: 1}}, Move: &meta.MoveRecord{Shard: 1, To: meta.SlotRef{NS: "c", Slot: 1}}},
			1: {Slots: []meta.SlotRef{{NS: "a", Slot: 2}, {NS: "d", Slot: 1}}, Move: &meta.MoveRecord{Shard: 1, To: meta.SlotRef{NS: "d", Slot: 1}, From: &meta.SlotRef{NS: "b", Slot: 2}}},
		}},
	}
	got := snap.LeakedSlots()
	want := []string{"namespace d: 0 slots allocated, 1 named by segments: -1 leaked"}
	if !slices.Equal(got, want) {
		t.Fatalf("LeakedSlots = %q, want %q", got, want)
	}
	snap.State.Namespaces[3].Used = 1
	snap.State.Namespaces[0].Used = 3
	if got := snap.LeakedSlots(); !slices.Equal(got, []string{"namespace a: 3 slots allocated, 2 named by segments: 1 leaked"}) {
		t.Fatalf("LeakedSlots = %q, want namespace a's one leaked slot", got)
	}
}
