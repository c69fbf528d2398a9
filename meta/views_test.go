package meta

import (
	"errors"
	"testing"
)

// TestVolumeInfo: the info of a volume counts its segments from its size,
// and its allocated, dirty and moving segments and owners from etcd.
func TestVolumeInfo(t *testing.T) {
	s := setup(t, 3, 1, 8)
	vm := addVolume(t, s, "vol", 2, 1, 5)
	ctx := testCtx(t)
	for seg := range int64(2) {
		if _, err := vm.Allocate(ctx, seg); err != nil {
			t.Fatal(err)
		}
	}
	if err := vm.MarkDirty(ctx, 1); err != nil {
		t.Fatal(err)
	}
	o, err := s.Acquire(ctx, "vol", OwnerOptions{Holder: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release(ctx)
	info, err := s.VolumeInfo(ctx, "vol")
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "vol" || info.Segments != 5 || info.Allocated != 2 || info.Dirty != 1 || info.Moving != 0 ||
		len(info.Owners) != 1 || info.Owners[0].Holder != "node-a" {
		t.Fatalf("info %+v", info)
	}
	if _, err := s.VolumeInfo(ctx, "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("info of a missing volume: %v", err)
	}
}
