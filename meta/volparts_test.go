package meta

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// TestVolumesPartsMatchPerVolumeReads: the parts of every named volume read
// by prefix, in pages of any size, are what the per-volume reads (Owners,
// Segments, Stale) return; records of volumes not named are skipped, even
// corrupt ones; a corrupt record of a named volume fails the read.
func TestVolumesPartsMatchPerVolumeReads(t *testing.T) {
	s := setup(t, 3, 2, 32)
	ctx := testCtx(t)
	// "v" is a prefix of "v1": their keys must not mix.
	v := addVolume(t, s, "v", 2, 1, 6)
	v1 := addVolume(t, s, "v1", 2, 1, 6)
	addVolume(t, s, "empty", 2, 1, 6)
	other := addVolume(t, s, "other", 2, 1, 6)
	for _, vm := range []*VolumeMap{v, v1, other} {
		for seg := range int64(3) {
			if _, err := vm.Allocate(ctx, seg*2); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.Acquire(ctx, "v", OwnerOptions{Holder: "node-a"}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"node-b", "node-c"} {
		if _, err := s.Acquire(ctx, "v1", OwnerOptions{Holder: h, ReadOnly: true}); err != nil {
			t.Fatal(err)
		}
	}
	marks := []struct {
		vm      *VolumeMap
		seg     int64
		idx     int
		stripes [][2]int64
	}{{v, 0, 1, nil}, {v, 4, 2, [][2]int64{{1, 3}}}, {v1, 2, 0, nil}, {other, 0, 0, nil}}
	for _, m := range marks {
		if err := m.vm.MarkStaleStripes(ctx, m.seg, m.idx, SlotRef{NS: "h0-n1", Slot: 5}, m.stripes); err != nil {
			t.Fatal(err)
		}
	}
	raw := rawClient(t)
	if _, err := raw.Put(ctx, s.keys.segment("other", 9), "not json"); err != nil {
		t.Fatal(err)
	}
	names := []string{"empty", "v", "v1"}
	want := map[string]*VolumeParts{}
	for _, n := range names {
		vm, err := s.VolumeMap(ctx, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := &VolumeParts{}
		if p.Owners, err = s.Owners(ctx, n); err != nil {
			t.Fatal(err)
		}
		if p.Segments, _, err = vm.Segments(ctx); err != nil {
			t.Fatal(err)
		}
		if p.Stale, err = vm.Stale(ctx); err != nil {
			t.Fatal(err)
		}
		want[n] = p
	}
	if len(want["v"].Segments) != 3 || len(want["v1"].Owners) != 2 || len(want["v"].Stale) != 2 || want["v"].Owners[0].Holder != "node-a" {
		t.Fatalf("per-volume reads: %+v %+v, want 3 segments, 2 readers, 2 marks", want["v"], want["v1"])
	}
	view, err := s.At(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Allocate(ctx, 5); err != nil { // after the view's revision
		t.Fatal(err)
	}
	defer func(p int64) { rangePage = p }(rangePage)
	for _, page := range []int64{1, 2, 1000} {
		rangePage = page
		got, err := view.VolumesParts(ctx, names)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("pages of %d keys: %v\n%s\nwant\n%s", page, err, partsString(got), partsString(want))
		}
	}
	live, err := s.VolumesParts(ctx, []string{"v"})
	if err != nil || len(live) != 1 || len(live["v"].Segments) != 4 {
		t.Fatalf("live store: %v, %v; want volume v alone, with the segment allocated since", live, err)
	}
	if _, err := raw.Put(ctx, s.keys.segment("v1", 9), "not json"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.VolumesParts(ctx, names); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("a corrupt segment record of a named volume: %v, want ErrCorruptRecord", err)
	}
}

func partsString(m map[string]*VolumeParts) string {
	var out string
	for n, p := range m {
		out += fmt.Sprintf("%s: owners %+v segments %d %+v stale %+v\n", n, p.Owners, len(p.Segments), p.Segments, p.Stale)
	}
	return out
}
