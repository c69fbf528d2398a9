package meta

import (
	"errors"
	"reflect"
	"testing"
)

// TestAllocations: one read returns every namespace's allocation as
// Allocation reads it one by one, also through a view pinned at a
// revision; AllocationOf says a missing one is not found.
func TestAllocations(t *testing.T) {
	s := setup(t, 3, 2, 8)
	ctx := testCtx(t)
	view, err := s.At(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateVolume(ctx, VolumeSpec{Name: "v", Size: 4 * testSlot, Layout: Layout{K: 2, M: 1, Chunk: 4096}}); err != nil {
		t.Fatal(err)
	}
	vm, err := s.VolumeMap(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vm.Allocate(ctx, 0); err != nil {
		t.Fatal(err)
	}
	nss, err := s.Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*Store{s, view} {
		all, err := st.Allocations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != len(nss) {
			t.Fatalf("%d allocations for %d namespaces", len(all), len(nss))
		}
		var used int64
		for _, n := range nss {
			one, err := st.Allocation(ctx, n.ID)
			if err != nil {
				t.Fatal(err)
			}
			got, err := AllocationOf(all, n)
			if err != nil || !reflect.DeepEqual(got, one) {
				t.Errorf("namespace %s: %+v %v, want %+v", n.ID, got, err, one)
			}
			used += got.Used
		}
		if want := map[*Store]int64{s: 3, view: 0}[st]; used != want {
			t.Errorf("store at revision %d: %d slots used, want %d", st.Rev(), used, want)
		}
	}
	if _, err := AllocationOf(map[string]*AllocRecord{}, nss[0]); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing allocation: %v", err)
	}
}
