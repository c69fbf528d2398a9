package meta

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/placement"
)

func TestClusterHostsNamespaces(t *testing.T) {
	s := newStore(t)
	ctx := testCtx(t)
	if _, err := s.AddHost(ctx, "h0", nil); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("host before init: %v", err)
	}
	if _, err := s.InitCluster(ctx, InitOptions{SlotSize: 3 << 20}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("slot size not a power of two: %v", err)
	}
	c, err := s.InitCluster(ctx, InitOptions{SlotSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.InitCluster(ctx, InitOptions{}); !errors.Is(err, ErrExists) {
		t.Fatalf("second init: %v", err)
	}
	if got, _ := s.Cluster(ctx); got.ID != c.ID || got.SlotSize != 1<<20 {
		t.Fatalf("cluster record %+v", got)
	}
	if _, err := s.AddHost(ctx, "h0", map[string]string{"rack": "r1"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		fn   func() error
		want error
	}{
		{"duplicate host", func() error { _, err := s.AddHost(ctx, "h0", nil); return err }, ErrExists},
		{"bad host name", func() error { _, err := s.AddHost(ctx, "a/b", nil); return err }, ErrInvalid},
		{"unknown host", func() error { return addNS(ctx, s, "hX", 1, "tcp://127.0.0.1:4420", 8<<20) }, ErrNotFound},
		{"bad path", func() error { return addNS(ctx, s, "h0", 1, "rdma://x", 8<<20) }, ErrInvalid},
		{"path without port", func() error { return addNS(ctx, s, "h0", 1, "tcp://127.0.0.1", 8<<20) }, ErrInvalid},
		{"too small for two slots", func() error { return addNS(ctx, s, "h0", 1, "tcp://127.0.0.1:4420", 1<<20) }, ErrInvalid},
		{"first namespace", func() error { return addNS(ctx, s, "h0", 1, "tcp://127.0.0.1:4420", 8<<20) }, nil},
		{"same nqn and nsid", func() error { return addNS(ctx, s, "h0", 1, "tcp://127.0.0.1:4421", 8<<20) }, ErrExists},
	} {
		if err := tc.fn(); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	ns, err := s.Namespace(ctx, "h0-n1")
	if err != nil || ns.Slots != 8 || ns.Capacity() != 7 || ns.State != "in" || ns.Paths[0].ANAState != ANAUnknown {
		t.Fatalf("namespace %+v %v", ns, err)
	}
	if err := s.SetNamespaceState(ctx, "h0-n1", placement.StateDraining); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPathState(ctx, "h0-n1", "tcp://127.0.0.1:4420", 2, ANAOptimized); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPathState(ctx, "h0-n1", "tcp://127.0.0.1:4420", 2, "bogus"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bogus ANA state: %v", err)
	}
	ns, _ = s.Namespace(ctx, "h0-n1")
	if ns.State != "draining" || ns.Paths[0].ANAGroup != 2 || ns.Paths[0].ANAState != ANAOptimized {
		t.Fatalf("after updates: %+v", ns)
	}
	if err := s.SetNamespaceState(ctx, "nope", placement.StateOut); !errors.Is(err, ErrNotFound) {
		t.Fatalf("state of a missing namespace: %v", err)
	}
}

func addNS(ctx context.Context, s *Store, host string, nsid uint32, path string, size int64) error {
	_, err := s.AddNamespace(ctx, NamespaceSpec{Host: host, NQN: "nqn.test:" + host, NSID: nsid, Size: size, Paths: []PathRecord{{Addr: path}}})
	return err
}

func TestVolumes(t *testing.T) {
	s := setup(t, 3, 1, 8)
	ctx := testCtx(t)
	l := Layout{K: 2, M: 1, Chunk: 4096}
	for _, tc := range []struct {
		name string
		spec VolumeSpec
		want error
	}{
		{"wider than the domains", VolumeSpec{Name: "w", Size: 1 << 20, Layout: Layout{K: 2, M: 2, Chunk: 4096}}, placement.ErrNotEnoughDomains},
		{"wide with shared domains", VolumeSpec{Name: "w", Size: 1 << 20, Layout: Layout{K: 2, M: 2, Chunk: 4096}, AllowSharedDomains: true}, nil},
		{"size not aligned", VolumeSpec{Name: "x", Size: 1000, Layout: l}, ErrInvalid},
		{"chunk not a power of two", VolumeSpec{Name: "x", Size: 1 << 20, Layout: Layout{K: 2, M: 1, Chunk: 12288}}, ErrInvalid},
		{"chunk over the slot", VolumeSpec{Name: "x", Size: 1 << 20, Layout: Layout{K: 2, M: 1, Chunk: 1 << 20}}, ErrInvalid},
		{"bad name", VolumeSpec{Name: "-x", Size: 1 << 20, Layout: l}, ErrInvalid},
		{"unknown checksum", VolumeSpec{Name: "x", Size: 1 << 20, Layout: Layout{K: 2, M: 1, Chunk: 4096, Checksum: "md5"}}, ErrInvalid},
		{"no room beside the checksums", VolumeSpec{Name: "x", Size: 1 << 20, Layout: Layout{K: 2, M: 1, Chunk: testSlot, Checksum: ChecksumCRC32C}}, ErrInvalid},
		{"checksummed", VolumeSpec{Name: "c", Size: 1 << 20, Layout: Layout{K: 2, M: 1, Chunk: 4096, Checksum: ChecksumCRC32C}}, nil},
		{"bound without checksums", VolumeSpec{Name: "x", Size: 1 << 20, Layout: l, BindChecksums: true}, ErrInvalid},
		{"bound", VolumeSpec{Name: "b", Size: 1 << 20, Layout: Layout{K: 2, M: 1, Chunk: 4096, Checksum: ChecksumCRC32C}, BindChecksums: true}, nil},
		{"ok", VolumeSpec{Name: "a", Size: 1 << 20, Layout: l}, nil},
		{"duplicate", VolumeSpec{Name: "a", Size: 1 << 20, Layout: l}, ErrExists},
	} {
		_, err := s.CreateVolume(ctx, tc.spec)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if b, err := s.Volume(ctx, "b"); err != nil || b.Layout.ChecksumSeed == 0 || !b.Layout.Geometry(testSlot).Checksums {
		t.Errorf("bound volume: %+v %v, want a checksum seed", b, err)
	}
	if c, err := s.Volume(ctx, "c"); err != nil || c.Layout.ChecksumSeed != 0 {
		t.Errorf("checksummed volume: %+v %v, want no checksum seed (format 2)", c, err)
	}
	if _, err := s.ResizeVolume(ctx, "a", 1<<19); !errors.Is(err, ErrInvalid) {
		t.Errorf("shrink: %v", err)
	}
	if v, err := s.ResizeVolume(ctx, "a", 2<<20); err != nil || v.Size != 2<<20 {
		t.Errorf("grow: %+v %v", v, err)
	}
	vm, _ := s.VolumeMap(ctx, "a", nil)
	for seg := range int64(3) {
		if _, err := vm.Allocate(ctx, seg); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteVolume(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Volume(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted volume: %v", err)
	}
	if used := checkAllocations(t, s); used != 0 {
		t.Errorf("%d slots still used after delete", used)
	}
	if vs, _ := s.Volumes(ctx); len(vs) != 3 || vs[0].Name != "b" || vs[1].Name != "c" || vs[1].Layout.Checksum != ChecksumCRC32C || vs[2].Name != "w" {
		t.Errorf("volumes: %+v", vs)
	}
}

// TestCorruptRecordsNamedByKey: damaged or unknown records are errors that
// name the key, never zero values.
func TestCorruptRecordsNamedByKey(t *testing.T) {
	s := setup(t, 3, 1, 4)
	vm := addVolume(t, s, "vol", 2, 1, 2)
	ctx := testCtx(t)
	cli := rawClient(t)
	for _, tc := range []struct {
		key, value string
		read       func() error
	}{
		{s.keys.namespace("h1-n1"), `{"v":1,"id":"h1-n1"`, func() error { _, err := s.Namespaces(ctx); return err }},
		{s.keys.volume("vol"), `{"v":1,"name":"vol","size":1048576,"layout":{"k":2,"m":1,"chunk":4096},"state":"ready","color":"red"}`,
			func() error { _, err := s.Volume(ctx, "vol"); return err }},
		{s.keys.host("h0"), `{"v":2,"name":"h0"}`, func() error { _, err := s.Hosts(ctx); return err }},
		{s.keys.alloc("h2-n1"), `{"v":1,"slots":5,"used":0,"bitmap":"AA=="}`, func() error { _, err := s.Allocation(ctx, "h2-n1"); return err }},
		{s.keys.segment("vol", 1), `{"v":1,"slots":[],"ver":1}`, func() error { _, _, err := vm.Lookup(ctx, 1); return err }},
		{s.keys.dirty("vol", 0), `{"v":1} trailing`, func() error { _, err := vm.Dirty(ctx); return err }},
	} {
		if _, err := cli.Put(ctx, tc.key, tc.value); err != nil {
			t.Fatal(err)
		}
		err := tc.read()
		if !errors.Is(err, ErrCorruptRecord) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s = %s: got %v, want ErrCorruptRecord naming the key", tc.key, tc.value, err)
		}
	}
}

func TestWatches(t *testing.T) {
	s := setup(t, 3, 1, 4)
	vm := addVolume(t, s, "vol", 2, 1, 2)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	_, rev, err := vm.Segments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	segs := vm.WatchSegments(ctx, rev)
	nss := s.WatchNamespaces(ctx, rev)
	slots, err := vm.Allocate(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.Free(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.SetNamespaceState(ctx, "h0-n1", placement.StateFailed); err != nil {
		t.Fatal(err)
	}
	ev := recv(t, segs)
	if ev.Err != nil || ev.Segment != 1 || ev.Record == nil || fmt.Sprint(ev.Record.Slots) != fmt.Sprint(slots) {
		t.Fatalf("allocation event %+v, allocated %v", ev, slots)
	}
	if ev := recv(t, segs); ev.Err != nil || ev.Segment != 1 || ev.Record != nil {
		t.Fatalf("free event %+v", ev)
	}
	nev := recv(t, nss)
	if nev.Err != nil || nev.ID != "h0-n1" || nev.Record == nil || nev.Record.State != "failed" {
		t.Fatalf("namespace event %+v", nev)
	}
	cancel()
	for range segs { // closed after cancel
	}
}

func recv[E any](t *testing.T, ch <-chan E) E {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return e
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event")
	}
	var zero E
	return zero
}

func TestUnreachableNamesEndpoint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	_, err = Open(context.Background(), Config{Endpoints: []string{addr}, DialTimeout: 300 * time.Millisecond})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "nvstripe etcd") {
		t.Fatalf("got %v; want ErrUnreachable naming %s and saying what to do", err, addr)
	}
}

func TestTasks(t *testing.T) {
	s := newStore(t)
	ctx := testCtx(t)
	if err := s.PutTask(ctx, &TaskRecord{ID: "rebuild-1", Kind: "rebuild", Total: 10, State: TaskRunning}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTask(ctx, &TaskRecord{ID: "bad", Kind: "x", State: "sleeping"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad task state: %v", err)
	}
	tk, err := s.Task(ctx, "rebuild-1")
	if err != nil || tk.Total != 10 {
		t.Fatalf("task %+v %v", tk, err)
	}
	if ts, _ := s.Tasks(ctx); len(ts) != 1 {
		t.Fatalf("tasks %v", ts)
	}
	_ = s.DeleteTask(ctx, "rebuild-1")
	if _, err := s.Task(ctx, "rebuild-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted task: %v", err)
	}
}

// TestVolumeFormats: a record written before checksums (no "checksum"
// field) is format 1 and maps to a geometry without them; a format-2
// record maps to one with them, whose segments hold less.
func TestVolumeFormats(t *testing.T) {
	var old VolumeRecord
	if err := decode("vol/old", []byte(`{"v":1,"name":"old","size":4096,"layout":{"k":2,"m":1,"chunk":4096},"state":"ready"}`), &old); err != nil {
		t.Fatal(err)
	}
	if g := old.Layout.Geometry(testSlot); g.Checksums || old.Layout.Format() != "format 1: no checksums" {
		t.Fatalf("old record: geometry %v, %s", g, old.Layout.Format())
	}
	l := Layout{K: 2, M: 1, Chunk: 4096, Checksum: ChecksumCRC32C}
	if g := l.Geometry(testSlot); !g.Checksums || g.SegmentData() >= old.Layout.Geometry(testSlot).SegmentData() {
		t.Fatalf("format 2 geometry %v holds %d bytes per segment", g, g.SegmentData())
	}
	var bound VolumeRecord
	if err := decode("vol/b", []byte(`{"v":1,"name":"b","size":4096,"layout":{"k":2,"m":1,"chunk":4096,"checksum":"crc32c","write_log":"ppl","checksum_seed":18446744073709551615},"state":"ready"}`), &bound); err != nil {
		t.Fatal(err)
	}
	if g := bound.Layout.Geometry(testSlot); g.Seed != 1<<64-1 || !g.Log || !strings.HasPrefix(bound.Layout.Format(), "format 4:") {
		t.Fatalf("format 4 record: geometry %v seed %#x, %s", g, g.Seed, bound.Layout.Format())
	}
	if err := decode("vol/x", []byte(`{"v":1,"name":"x","size":4096,"layout":{"k":2,"m":1,"chunk":4096,"checksum_seed":1},"state":"ready"}`), &VolumeRecord{}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("checksum seed without checksums: %v", err)
	}
}
