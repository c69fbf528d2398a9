package controller

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta"
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
