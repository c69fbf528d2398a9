package meta

import (
	"errors"
	"slices"
	"testing"
)

func TestStaleMarks(t *testing.T) {
	s := setup(t, 3, 1, 8)
	vm := addVolume(t, s, "vol", 2, 1, 20)
	ctx := testCtx(t)
	a, b := SlotRef{NS: "h0-n1", Slot: 3}, SlotRef{NS: "h1-n1", Slot: 4}
	for _, m := range []StaleMark{{7, 1, a}, {3, 0, b}, {7, 2, b}} {
		if err := vm.MarkStale(ctx, m.Segment, m.Index, m.Ref); err != nil {
			t.Fatal(err)
		}
	}
	got, err := vm.Stale(ctx)
	want := []StaleMark{{3, 0, b}, {7, 1, a}, {7, 2, b}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("stale: %v %v, want %v", got, err, want)
	}
	if err := vm.ClearStale(ctx, 7, 1, b); err != nil { // another location: kept
		t.Fatal(err)
	}
	if err := vm.ClearStale(ctx, 3, 0, b); err != nil {
		t.Fatal(err)
	}
	if got, _ := vm.Stale(ctx); !slices.Equal(got, want[1:]) {
		t.Fatalf("after clear: %v, want %v", got, want[1:])
	}
	if _, err := vm.Allocate(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if err := vm.Free(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if got, _ := vm.Stale(ctx); len(got) != 0 {
		t.Fatalf("free kept the stale marks: %v", got)
	}
	if err := vm.MarkStale(ctx, 20, 0, a); !errors.Is(err, ErrInvalid) {
		t.Errorf("mark stale past the end: %v", err)
	}
}
