package controller

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/placement"
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
	// Slots that missed only some stripes (out of space) cost redundancy
	// where their stripes overlap.
	markStripes := func(idx int, stripes [][2]int64) {
		t.Helper()
		if err := vm.MarkStaleStripes(ctx, 0, idx, segs[0].Slots[idx], stripes); err != nil {
			t.Fatal(err)
		}
	}
	markStripes(1, [][2]int64{{0, 2}})
	markStripes(4, [][2]int64{{2, 3}, {7, 9}})
	markStripes(5, [][2]int64{{5, 7}})
	if h := health(); h.Lost != 1 || h.Stale != 3 || h.Status() != "degraded by 1" {
		t.Fatalf("three slots missing different stripes: %+v (%s), want lost 1, stale 3", h, h.Status())
	}
	markStripes(5, [][2]int64{{1, 3}})
	if h := health(); h.Lost != 2 || h.Stale != 3 || h.Status() != "at risk" {
		t.Fatalf("two slots missing stripe 1 (and 2): %+v (%s), want lost 2, at risk", h, h.Status())
	}
}

// staleRepairer is a Mover whose RepairStale counts its calls and clears
// the volume's marks once fix is set, as a repair that reached the slots
// would.
type staleRepairer struct {
	metaMover
	calls atomic.Int32
	fix   atomic.Bool
}

func (s *staleRepairer) RepairStale(ctx context.Context, vol string) (int64, error) {
	s.calls.Add(1)
	if !s.fix.Load() {
		return 0, nil // the namespace did not answer after all
	}
	o, err := s.acquire(ctx, vol)
	if err != nil {
		return 0, err
	}
	defer s.release(context.WithoutCancel(ctx))
	vm, err := s.store.VolumeMap(ctx, vol, o)
	if err != nil {
		return 0, err
	}
	marks, err := vm.Stale(ctx)
	for _, m := range marks {
		err = errors.Join(err, vm.ClearStale(ctx, m.Segment, m.Index, m.Ref))
	}
	return int64(len(marks)), err
}

// TestRunnerRepairsStaleSlots: the leader has the Mover repair an unmapped
// volume with stale slots; while the marks outlive the repairs it retries
// with growing waits (not every tick); an owned volume is left to its owner.
func TestRunnerRepairsStaleSlots(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := openStore(t, metaCluster(t, 6, 1))
	owner, err := store.Acquire(ctx, "v", meta.OwnerOptions{Holder: "app"})
	if err != nil {
		t.Fatal(err)
	}
	vm, _ := store.VolumeMap(ctx, "v", owner)
	segs, _, _ := vm.Segments(ctx)
	if err := vm.MarkStale(ctx, 0, 2, segs[0].Slots[2]); err != nil {
		t.Fatal(err)
	}
	mv := &staleRepairer{metaMover: metaMover{store: store, holder: "ctl", act: newActors()}}
	_, done := startRunner(t, ctx, store, "ctl", mv)
	time.Sleep(500 * time.Millisecond)
	if n := mv.calls.Load(); n != 0 {
		t.Fatalf("%d repairs of a volume its owner has mapped", n)
	}
	owner.Release(ctx)
	waitFor(t, "a repair", func() bool { return mv.calls.Load() > 0 })
	time.Sleep(1500 * time.Millisecond) // 15 ticks; waits of 100, 200, 400, 800ms
	if n := mv.calls.Load(); n > 5 {
		t.Fatalf("%d repairs in 1.5s of a volume whose marks stay: want growing waits", n)
	}
	mv.fix.Store(true)
	waitFor(t, "the marks cleared", func() bool {
		marks, err := vm.Stale(ctx)
		return err == nil && len(marks) == 0
	})
	n := mv.calls.Load()
	time.Sleep(500 * time.Millisecond)
	if mv.calls.Load() != n {
		t.Fatal("repairs went on after the marks were cleared")
	}
	cancel()
	<-done
}

// changeCluster changes a record of each kind a snapshot reads: a
// namespace state, a stale mark, a task and a new host with a namespace.
func changeCluster(t *testing.T, store *meta.Store) {
	t.Helper()
	ctx := context.Background()
	if err := store.SetNamespaceState(ctx, "h0-n1", placement.StateDraining); err != nil {
		t.Fatal(err)
	}
	vm, err := store.VolumeMap(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	segs, _, err := vm.Segments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.MarkStale(ctx, 0, 1, segs[0].Slots[1]); err != nil {
		t.Fatal(err)
	}
	if err := store.PutTask(ctx, &meta.TaskRecord{ID: "t", Kind: "scrub", State: meta.TaskRunning}); err != nil {
		t.Fatal(err)
	}
	addMetaHost(t, store, 6)
}

// checkChanged fails unless snap shows what changeCluster did.
func checkChanged(t *testing.T, snap *Snapshot) {
	t.Helper()
	if n := snap.Namespaces["h0-n1"]; n == nil || n.State != placement.StateDraining.String() ||
		len(snap.Stale) != 1 || len(snap.Tasks) != 1 || len(snap.State.Hosts) != 7 {
		t.Fatalf("snapshot at %d after the changes: h0-n1 %+v, %d stale, %d tasks, %d hosts; want draining, 1, 1, 7",
			snap.Rev, n, len(snap.Stale), len(snap.Tasks), len(snap.State.Hosts))
	}
}

// TestLoadSnapshotAtOneRevision: a snapshot records its revision; read
// again at that revision after the records changed, it is the same; read
// at the current one it shows the changes.
func TestLoadSnapshotAtOneRevision(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, metaCluster(t, 6, 2))
	first, err := LoadSnapshot(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if first.Rev <= 0 || len(first.State.Segments) != 2 || len(first.State.Hosts) != 6 {
		t.Fatalf("first snapshot: rev %d, %d segments, %d hosts; want > 0, 2, 6", first.Rev, len(first.State.Segments), len(first.State.Hosts))
	}
	changeCluster(t, store)
	view, err := store.AtRev(first.Rev)
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadSnapshot(ctx, view)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, first) {
		t.Fatalf("snapshot read again at revision %d differs:\n%+v\nwant\n%+v", first.Rev, again, first)
	}
	now, err := LoadSnapshot(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if now.Rev <= first.Rev {
		t.Fatalf("snapshot after changes at revision %d, not after %d", now.Rev, first.Rev)
	}
	checkChanged(t, now)
}

// TestLoadSnapshotIgnoresLaterChanges: records changed after the snapshot
// pinned its revision, while it reads, do not show in it.
func TestLoadSnapshotIgnoresLaterChanges(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, metaCluster(t, 6, 2))
	before, err := LoadSnapshot(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := loadPinned(ctx, store, func(ctx context.Context, view *meta.Store) (*Snapshot, error) {
		changeCluster(t, store)
		return loadAt(ctx, view)
	})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Rev != before.Rev {
		t.Fatalf("snapshot at revision %d, want %d (nothing changed before the pin)", snap.Rev, before.Rev)
	}
	if !reflect.DeepEqual(snap, before) {
		t.Fatalf("changes made during the read show in the snapshot:\n%+v\nwant\n%+v", snap, before)
	}
	after, err := LoadSnapshot(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	checkChanged(t, after)
}

// TestLoadSnapshotCompacted: when etcd compacts the revision a snapshot
// reads at, LoadSnapshot pins a fresh one, up to compactRetries times,
// then fails with meta.ErrCompacted; a caller's pinned view is not re-pinned.
func TestLoadSnapshotCompacted(t *testing.T) {
	ctx := context.Background()
	eps := metaCluster(t, 6, 2)
	store := openStore(t, eps)
	var revs []int64
	compactOnce := func(ctx context.Context, view *meta.Store) (*Snapshot, error) {
		revs = append(revs, view.Rev())
		if len(revs) == 1 {
			eps.compact(t)
		}
		return loadAt(ctx, view)
	}
	snap, err := loadPinned(ctx, store, compactOnce)
	if err != nil || len(revs) != 2 || snap.Rev != revs[1] || revs[1] <= revs[0] {
		t.Fatalf("compacted once: %v after pins at %v; want a snapshot at a second, later revision", err, revs)
	}
	revs = nil
	compactAlways := func(ctx context.Context, view *meta.Store) (*Snapshot, error) {
		revs = append(revs, view.Rev())
		eps.compact(t)
		return loadAt(ctx, view)
	}
	if _, err := loadPinned(ctx, store, compactAlways); !errors.Is(err, meta.ErrCompacted) || len(revs) != compactRetries+1 {
		t.Fatalf("always compacted: %v after %d pins; want meta.ErrCompacted after %d", err, len(revs), compactRetries+1)
	}
	view, err := store.At(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eps.compact(t)
	if _, err := LoadSnapshot(ctx, view); !errors.Is(err, meta.ErrCompacted) {
		t.Fatalf("load through a compacted view: %v, want meta.ErrCompacted", err)
	}
}

// TestLoadSnapshotSameAsEachVolumeRead: the snapshot read with one range
// request per prefix (owners, segments, stale marks) is the snapshot read
// volume by volume, on a cluster with owners, readers, stale marks (at the
// current location and an old one, whole and by stripes), a move in flight,
// a volume without segments and volume names that are prefixes of others.
func TestLoadSnapshotSameAsEachVolumeRead(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, metaCluster(t, 7, 2))
	for _, name := range []string{"v1", "w"} {
		if _, err := store.CreateVolume(ctx, meta.VolumeSpec{Name: name, Size: 8 << 20,
			Layout: meta.Layout{K: 4, M: 2, Chunk: 64 << 10}}); err != nil {
			t.Fatal(err)
		}
	}
	owner, err := store.Acquire(ctx, "v", meta.OwnerOptions{Holder: "app"})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Release(ctx)
	for _, h := range []string{"r1", "r2"} {
		ro, err := store.Acquire(ctx, "v1", meta.OwnerOptions{Holder: h, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Release(ctx)
	}
	vm, err := store.VolumeMap(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	vm1, err := store.VolumeMap(ctx, "v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vm1.Allocate(ctx, 1); err != nil {
		t.Fatal(err)
	}
	segs, _, err := vm.Segments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := meta.SlotRef{NS: segs[1].Slots[3].NS, Slot: segs[1].Slots[3].Slot + 7}
	for _, m := range []struct {
		seg     int64
		idx     int
		ref     meta.SlotRef
		stripes [][2]int64
	}{{0, 1, segs[0].Slots[1], nil}, {0, 4, segs[0].Slots[4], [][2]int64{{2, 5}}}, {1, 3, old, nil}} {
		if err := vm.MarkStaleStripes(ctx, m.seg, m.idx, m.ref, m.stripes); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := vm.BeginMove(ctx, 1, 2, ""); err != nil {
		t.Fatal(err)
	}
	view, err := store.At(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, err := loadEachVolume(ctx, view)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Volumes) != 3 || want.Owners["v"] != "app" || len(want.Readers["v1"]) != 2 || len(want.Stale) != 1 ||
		len(want.StaleStripes) != 1 || len(want.State.Segments) != 3 || want.State.Segments[1].Move == nil {
		t.Fatalf("read volume by volume: %d volumes, owners %v, readers %v, stale %v %v, segments %+v; want 3 volumes, "+
			"owner and 2 readers, 2 marks in one segment, 3 segments, one moving", len(want.Volumes), want.Owners, want.Readers,
			want.Stale, want.StaleStripes, want.State.Segments)
	}
	got, err := LoadSnapshot(ctx, view)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot read by prefix:\n%+v\nwant (read volume by volume)\n%+v", got, want)
	}
}

// loadEachVolume reads a snapshot through view as LoadSnapshot did before
// it read the per-volume prefixes whole: each ready volume's owners, record,
// segments and stale marks with reads of their own.
func loadEachVolume(ctx context.Context, view *meta.Store) (*Snapshot, error) {
	s, err := loadCluster(ctx, view)
	if err != nil {
		return nil, err
	}
	vols, err := view.Volumes(ctx)
	if err != nil {
		return nil, err
	}
	for _, v := range vols {
		if v.State != meta.VolumeReady {
			continue
		}
		p := &meta.VolumeParts{}
		if p.Owners, err = view.Owners(ctx, v.Name); err != nil {
			return nil, err
		}
		vm, err := view.VolumeMap(ctx, v.Name, nil)
		if err != nil {
			return nil, err
		}
		if p.Segments, _, err = vm.Segments(ctx); err != nil {
			return nil, err
		}
		if p.Stale, err = vm.Stale(ctx); err != nil {
			return nil, err
		}
		s.addVolume(v, p)
	}
	s.sortSegments()
	return s, nil
}
