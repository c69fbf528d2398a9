package meta

import (
	"errors"
	"strings"
	"testing"
)

// TestWriteTables checks the people's renderings of the list and info
// commands: headers, one row per record, sizes in binary units.
func TestWriteTables(t *testing.T) {
	var b strings.Builder
	ns := []NamespaceUse{{NamespaceRecord: &NamespaceRecord{ID: "h1-n1", Host: "h1", State: "in", Size: 1 << 30, NQN: "nqn.x", NSID: 1,
		Unfenced: true, Paths: []PathRecord{{Addr: "tcp://10.0.0.1:4420", ANAState: "optimized"}}}, UsedBytes: 3 << 20}}
	if err := WriteNamespaceUses(&b, ns); err != nil {
		t.Fatal(err)
	}
	want(t, b.String(), "ID ", "PATHS", "h1-n1", "1 GiB", "3 MiB", "10.0.0.1:4420(optimized)", "  no  ")
	b.Reset()
	v := &VolumeRecord{Name: "v1", Size: 4 << 30, Layout: Layout{K: 4, M: 2, Chunk: 128 << 10}, State: VolumeReady}
	if err := WriteVolumes(&b, []*VolumeRecord{v}); err != nil {
		t.Fatal(err)
	}
	want(t, b.String(), "NAME ", "v1", "4 GiB", "4+2", "128 KiB")
	b.Reset()
	if err := WriteVolumeInfo(&b, &VolumeInfo{VolumeRecord: v, Segments: 4, Allocated: 2, Dirty: 1}); err != nil {
		t.Fatal(err)
	}
	want(t, b.String(), "volume v1\n", "layout 4+2 chunk 128 KiB", "segments 2 allocated of 4 (1 dirty, 0 moving)", "not mapped\n")
	b.Reset()
	WriteVolumeInfo(&b, &VolumeInfo{VolumeRecord: v, Owners: []OwnerInfo{{Holder: "map.a", Mode: "rw", Epoch: 7}}})
	if want(t, b.String(), "owner map.a (rw, epoch 7)"); strings.Contains(b.String(), "not mapped") {
		t.Errorf("a mapped volume says not mapped:\n%s", b.String())
	}
	b.Reset()
	if err := WriteHosts(&b, []*HostRecord{{Name: "h1", Labels: map[string]string{"zone": "z", "rack": "r1"}}}); err != nil {
		t.Fatal(err)
	}
	want(t, b.String(), "NAME ", "LABELS", "h1", "rack=r1,zone=z")
	b.Reset()
	if err := WriteCluster(&b, &ClusterRecord{Name: "c", ID: "id1", SlotSize: 1 << 30, Schema: 2}); err != nil {
		t.Fatal(err)
	}
	want(t, b.String(), "cluster c\n", "slot size 1 GiB\n", "failure domain host\n", "max overcommit 2\n", "schema 2\n")
}

// want fails t for each of subs that s lacks.
func want(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("lacks %q:\n%s", sub, s)
		}
	}
}

func TestPathRecords(t *testing.T) {
	ps, err := PathRecords([]string{"tcp://10.0.0.1:4420", "tcp://10.0.0.2:4420"})
	if err != nil || len(ps) != 2 || ps[1].Addr != "tcp://10.0.0.2:4420" {
		t.Fatalf("PathRecords: %+v %v", ps, err)
	}
	if _, err := PathRecords([]string{"tcp://10.0.0.1:4420", "10.0.0.2:4420"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a path without tcp://: %v, want ErrInvalid", err)
	}
}

// TestVolumeInfo: the info of a volume counts its segments from its size,
// and its allocated, dirty and moving segments and owners from etcd.
func TestVolumeInfo(t *testing.T) {
	s := setup(t, 3, 1, 8)
	vm := addVolume(t, s, "vol", 2, 1, 5)
	ctx := testCtx(t)
	info := func() *VolumeInfo {
		t.Helper()
		info, err := s.VolumeInfo(ctx, "vol")
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	if i := info(); i.Name != "vol" || i.Segments != 5 || i.Allocated != 0 || i.Dirty != 0 || len(i.Owners) != 0 {
		t.Fatalf("info of a new volume: %+v", i)
	}
	for _, seg := range []int64{0, 3} {
		if _, err := vm.Allocate(ctx, seg); err != nil {
			t.Fatal(err)
		}
	}
	if err := vm.MarkDirty(ctx, 3); err != nil {
		t.Fatal(err)
	}
	o := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "node-a"})
	defer o.Release(ctx)
	if i := info(); i.Segments != 5 || i.Allocated != 2 || i.Dirty != 1 || i.Moving != 0 ||
		len(i.Owners) != 1 || i.Owners[0].Holder != "node-a" {
		t.Fatalf("info of a used volume: %+v", i)
	}
	if _, err := s.VolumeInfo(ctx, "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("info of a missing volume: %v", err)
	}
}
