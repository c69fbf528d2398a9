package volclient

import (
	"context"
	"fmt"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nvmeof/initiator"
	"github.com/nvstripe/nvstripe/nvmeof/target"
	"github.com/nvstripe/nvstripe/volclient/volclienttest"
)

// addUnfenced serves a namespace from a target without reservations on
// host h<i> and adds it as `ns add` does (connect, label, record).
func addUnfenced(t *testing.T, s *meta.Store, i int, allow bool) *meta.NamespaceRecord {
	t.Helper()
	ctx := context.Background()
	mem, err := blockdev.NewMem(8<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	nqn := fmt.Sprintf("nqn.2026-11.io.nvstripe:noresv-t%d", i)
	tgt, err := target.New(target.Config{
		Subsystems: []target.SubsystemConfig{{NQN: nqn, Namespaces: []target.NamespaceConfig{{NSID: 1, Device: mem}},
			AllowedHosts: []string{initiator.DefaultHostNQN}, NoReservations: true}},
		Listeners: []target.ListenerConfig{{Address: "127.0.0.1:0"}},
	})
	if err == nil {
		err = tgt.Start(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tgt.Close() })
	host := fmt.Sprintf("h%d", i)
	if _, err := s.AddHost(ctx, host, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := AddNamespace(ctx, s, meta.NamespaceSpec{Host: host, NQN: nqn, NSID: 1, AllowUnfenced: allow,
		Paths: []meta.PathRecord{{Addr: "tcp://" + tgt.Addr(0)}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestUnfencedNamespacesTakeNoShards: `ns add` of a namespace whose target
// has no reservations records it as unfenced; such a namespace gets no
// shard of a volume written all over, unless the operator allowed it (then
// it does, and the volume works on it with a warning).
func TestUnfencedNamespacesTakeNoShards(t *testing.T) {
	ctx := context.Background()
	s := newClusterStore(t)
	c, err := s.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		mem, err := blockdev.NewMem(8<<20, 4096)
		if err != nil {
			t.Fatal(err)
		}
		volclienttest.ServeNamespace(t, s, c, i, mem)
	}
	refused := addUnfenced(t, s, 3, false)
	allowed := addUnfenced(t, s, 4, true)
	if !refused.Unfenced || refused.Placeable() || refused.Fencing() != "no" {
		t.Fatalf("namespace without reservations, not allowed: %+v (fencing %q)", refused, refused.Fencing())
	}
	if !allowed.Unfenced || !allowed.Placeable() || allowed.Fencing() != "no, allowed" {
		t.Fatalf("namespace without reservations, allowed: %+v (fencing %q)", allowed, allowed.Fencing())
	}
	// 2+1 over four hosts: each segment needs three of them.
	if _, err := s.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: 12 << 20, Layout: meta.Layout{K: 2, M: 1, Chunk: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	var warned int
	m, err := OpenVolume(ctx, s, "v", OpenOptions{Holder: "n1", Logf: func(string, ...any) { warned++ }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	buf := make([]byte, 1<<20)
	for off := int64(0); off < m.Volume.Size(); off += int64(len(buf)) {
		if err := m.Volume.WriteAt(ctx, buf, off); err != nil {
			t.Fatalf("write at %d: %v", off, err)
		}
	}
	segs, _, err := m.Map.Segments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	onAllowed := 0
	for i, seg := range segs {
		for _, sl := range seg.Slots {
			switch sl.NS {
			case refused.ID:
				t.Errorf("segment %d has a shard on %s, which cannot fence and was not allowed", i, sl.NS)
			case allowed.ID:
				onAllowed++
			}
		}
	}
	if onAllowed == 0 {
		t.Errorf("no shard on %s, which the operator allowed unfenced", allowed.ID)
	}
	if warned == 0 {
		t.Error("opening a volume with a shard on an unfenced namespace logged no warning")
	}
}
