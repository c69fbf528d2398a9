package meta

import (
	"errors"
	"reflect"
	"testing"
)

func TestStaleMarks(t *testing.T) {
	s := setup(t, 3, 1, 8)
	vm := addVolume(t, s, "vol", 2, 1, 20)
	ctx := testCtx(t)
	a, b := SlotRef{NS: "h0-n1", Slot: 3}, SlotRef{NS: "h1-n1", Slot: 4}
	stripes := [][2]int64{{0, 2}, {5, 6}}
	for _, m := range []StaleMark{{7, 1, a, nil}, {3, 0, b, nil}, {7, 2, b, stripes}} {
		if err := vm.MarkStaleStripes(ctx, m.Segment, m.Index, m.Ref, m.Stripes); err != nil {
			t.Fatal(err)
		}
	}
	got, err := vm.Stale(ctx)
	want := []StaleMark{{3, 0, b, nil}, {7, 1, a, nil}, {7, 2, b, stripes}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("stale: %v %v, want %v", got, err, want)
	}
	if err := vm.ClearStale(ctx, 7, 1, b); err != nil { // another location: kept
		t.Fatal(err)
	}
	if err := vm.ClearStale(ctx, 3, 0, b); err != nil {
		t.Fatal(err)
	}
	if got, _ := vm.Stale(ctx); !reflect.DeepEqual(got, want[1:]) {
		t.Fatalf("after clear: %v, want %v", got, want[1:])
	}
	allocateFree(t, ctx, vm, 7)
	if got, _ := vm.Stale(ctx); len(got) != 0 {
		t.Fatalf("free kept the stale marks: %v", got)
	}
	if err := vm.MarkStale(ctx, 20, 0, a); !errors.Is(err, ErrInvalid) {
		t.Errorf("mark stale past the end: %v", err)
	}
	for _, bad := range [][][2]int64{{{3, 3}}, {{4, 6}, {1, 2}}, {{0, 2}, {2, 3}}, {{-1, 1}}} {
		if err := vm.MarkStaleStripes(ctx, 3, 0, a, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("mark stale stripes %v: %v, want ErrInvalid", bad, err)
		}
	}
}
