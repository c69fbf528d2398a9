package meta

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/placement"
)

// viewState is what TestViewPinsRevision reads through a store or a view.
type viewState struct {
	nsState string
	used    int64
	segs    int
	stale   int
}

func readViewState(t *testing.T, s *Store) viewState {
	t.Helper()
	ctx := testCtx(t)
	n, err := s.Namespace(ctx, "h0-n1")
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Allocation(ctx, "h0-n1")
	if err != nil {
		t.Fatal(err)
	}
	vm, err := s.VolumeMap(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	segs, _, err := vm.Segments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	marks, err := vm.Stale(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return viewState{nsState: n.State, used: a.Used, segs: len(segs), stale: len(marks)}
}

// TestViewPinsRevision: a view reads what was stored at its revision while
// the store moves on, and refuses every kind of write without changing
// anything or touching the store's Allocate cache.
func TestViewPinsRevision(t *testing.T) {
	ctx := testCtx(t)
	s := setup(t, 6, 1, 8)
	vm := addVolume(t, s, "v", 4, 2, 3)
	seg0, err := vm.Allocate(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	view, err := s.At(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if view.Rev() <= 0 || s.Rev() != 0 {
		t.Fatalf("view rev %d, store rev %d: want > 0 and 0", view.Rev(), s.Rev())
	}
	before := viewState{nsState: "in", used: 1, segs: 1, stale: 0}
	if got := readViewState(t, view); got != before {
		t.Fatalf("view before changes: %+v, want %+v", got, before)
	}
	if _, err := vm.Allocate(ctx, 1); err != nil { // 6 namespaces, 6 shards: h0-n1 gets one
		t.Fatal(err)
	}
	if err := s.SetNamespaceState(ctx, "h0-n1", placement.StateDraining); err != nil {
		t.Fatal(err)
	}
	if err := vm.MarkStale(ctx, 0, 0, seg0[0]); err != nil {
		t.Fatal(err)
	}
	after := viewState{nsState: "draining", used: 2, segs: 2, stale: 1}
	if got := readViewState(t, s); got != after {
		t.Fatalf("store after changes: %+v, want %+v", got, after)
	}
	if got := readViewState(t, view); got != before {
		t.Fatalf("view after changes: %+v, want %+v (as at revision %d)", got, before, view.Rev())
	}
	checkViewWrites(t, s, view)
	if got := readViewState(t, s); got != after {
		t.Fatalf("store after writes through the view: %+v, want %+v", got, after)
	}
	if err := view.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Hosts(ctx); err != nil {
		t.Fatalf("store after closing a view: %v", err)
	}
}

// checkViewWrites tries each kind of write through view: each fails with
// ErrReadOnly naming the revision, and none reaches etcd or the store's
// Allocate cache.
func checkViewWrites(t *testing.T, s, view *Store) {
	t.Helper()
	ctx := testCtx(t)
	if err := s.withSnapshot(ctx, func(*snapshot) error { return nil }); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	cache := s.snap
	s.mu.Unlock()
	if cache == nil {
		t.Fatal("store's Allocate cache not filled")
	}
	vvm, err := view.VolumeMap(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string]func() error{
		"namespace state": func() error { return view.SetNamespaceState(ctx, "h1-n1", placement.StateOut) },
		"add host":        func() error { _, err := view.AddHost(ctx, "h9", nil); return err },
		"allocate":        func() error { _, err := vvm.Allocate(ctx, 2); return err },
		"mark stale":      func() error { return vvm.MarkStale(ctx, 0, 1, SlotRef{NS: "h1-n1", Slot: 1}) },
		"mark dirty":      func() error { return vvm.MarkDirty(ctx, 0) },
		"put task":        func() error { return view.PutTask(ctx, &TaskRecord{ID: "t1", Kind: "move", State: TaskRunning}) },
		"delete volume":   func() error { return view.DeleteVolume(ctx, "v") },
		"acquire":         func() error { _, err := view.Acquire(ctx, "v", OwnerOptions{Holder: "x"}); return err },
		"campaign": func() error {
			_, err := view.Campaign(ctx, "x", 2*time.Second)
			return err
		},
	}
	for what, write := range writes {
		err := write()
		if !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "revision") {
			t.Errorf("%s through a view: %v, want ErrReadOnly naming the revision", what, err)
		}
	}
	view.mu.Lock()
	viewCache := view.snap
	view.mu.Unlock()
	s.mu.Lock()
	storeCache := s.snap
	s.mu.Unlock()
	if viewCache != nil || storeCache != cache {
		t.Errorf("Allocate cache: view's %p (want nil), store's %p (want %p, untouched)", viewCache, storeCache, cache)
	}
	checkNothingWritten(t, s)
}

// checkNothingWritten: no record checkViewWrites tried to write exists.
func checkNothingWritten(t *testing.T, s *Store) {
	t.Helper()
	ctx := testCtx(t)
	if n, err := s.Namespace(ctx, "h1-n1"); err != nil || n.State != "in" {
		t.Errorf("h1-n1 after a state change through a view: %+v, %v", n, err)
	}
	if _, err := s.Task(ctx, "t1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("task written through a view: %v", err)
	}
	if os, err := s.Owners(ctx, "v"); err != nil || len(os) != 0 {
		t.Errorf("owners after an acquire through a view: %v, %v", os, err)
	}
	if v, err := s.Volume(ctx, "v"); err != nil || v.State != VolumeReady {
		t.Fatalf("volume after a delete through a view: %+v, %v", v, err)
	}
	if _, err := s.Leader(ctx); !errors.Is(err, ErrNotFound) {
		t.Errorf("leader after a campaign through a view: %v", err)
	}
	vm, err := s.VolumeMap(ctx, "v", nil)
	if err != nil {
		t.Fatalf("volume after a delete through a view: %v", err)
	}
	if _, ok, err := vm.Lookup(ctx, 2); ok || err != nil {
		t.Errorf("segment 2 after an allocation through a view: allocated %v, %v", ok, err)
	}
	if d, err := vm.Dirty(ctx); len(d) != 0 || err != nil {
		t.Errorf("dirty marks after marking through a view: %v, %v", d, err)
	}
}

// TestViewCompacted: once etcd compacts past a view's revision, its reads
// fail with ErrCompacted naming the revision; the store and a fresh view
// read on.
func TestViewCompacted(t *testing.T) {
	ctx := testCtx(t)
	s, etcd := privateStore(t)
	populate(t, s, 0, 0, 0)
	view, err := s.At(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddHost(ctx, "h0", nil); err != nil {
		t.Fatal(err)
	}
	if hs, err := view.Hosts(ctx); err != nil || len(hs) != 0 {
		t.Fatalf("view before compaction: %d hosts, %v; want 0", len(hs), err)
	}
	etcd.compact(t)
	_, err = view.Hosts(ctx)
	if !errors.Is(err, ErrCompacted) || errors.Is(err, ErrReadOnly) {
		t.Fatalf("view after compaction: %v, want ErrCompacted", err)
	}
	if want := fmt.Sprintf("revision %d", view.Rev()); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %q", err, want)
	}
	fresh, err := s.At(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hs, err := fresh.Hosts(ctx); err != nil || len(hs) != 1 || fresh.Rev() <= view.Rev() {
		t.Fatalf("fresh view at %d (old %d): %d hosts, %v; want 1", fresh.Rev(), view.Rev(), len(hs), err)
	}
	if _, err := s.AtRev(0); !errors.Is(err, ErrInvalid) {
		t.Errorf("AtRev(0): %v, want ErrInvalid", err)
	}
}
