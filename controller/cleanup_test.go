package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/placement"
)

// TestCleanupSparesMoveEndingMidTick: a move of the runner's own that ends
// after a tick read its snapshot (running task, move record in it) is not
// taken for interrupted by that tick's cleanup: its task record, written
// done, stays until the next tick removes it, and nothing is settled.
func TestCleanupSparesMoveEndingMidTick(t *testing.T) {
	eps := metaCluster(t, 7, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := openStore(t, eps)
	seg := decide.SegmentID{Volume: "v", Index: 0}
	if err := store.SetNamespaceState(ctx, segmentsOf(t, store)[0].Slots[0].NS, placement.StateDraining); err != nil {
		t.Fatal(err)
	}
	committed, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	mv := &metaMover{store: store, holder: "ctl", steps: 1, step: time.Millisecond, act: newActors(),
		afterCommit: func(context.Context) { once.Do(func() { close(committed); <-gate }) }}
	var midTick atomic.Pointer[func()]
	var settled atomic.Int32
	r, err := NewRunner(RunnerConfig{Store: store, Holder: "ctl", Mover: mv, Decide: decide.Config{OutAfter: time.Hour, MaxMovesPerNS: 1},
		Probe: func(context.Context, *meta.NamespaceRecord) bool {
			if f := midTick.Swap(nil); f != nil {
				(*f)()
			}
			return true
		},
		Logf: func(f string, a ...any) {
			line := fmt.Sprintf(f, a...)
			if strings.Contains(line, "settling") {
				settled.Add(1)
			}
			t.Log(line)
		}})
	if err != nil {
		t.Fatal(err)
	}
	r.begin()
	defer r.wg.Wait()
	defer cancel()
	if err := r.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-committed:
	case <-time.After(time.Minute):
		t.Fatal("no move began and committed after the first tick")
	}
	var ended error
	end := func() { // between the second tick's snapshot and its cleanup
		close(gate)
		ended = waitEnded(ctx, r, store, seg)
	}
	midTick.Store(&end)
	if err := r.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if ended != nil {
		t.Fatal(ended)
	}
	if rec, err := store.Task(ctx, moves.TaskID(seg)); err != nil || rec.State != meta.TaskDone {
		t.Errorf("after the tick the move ended in: task %+v, %v; want it kept, done, for the next tick", rec, err)
	}
	if n := settled.Load(); n != 0 {
		t.Errorf("%d settle attempts of a move that ended normally", n)
	}
	if err := r.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if rec, err := store.Task(ctx, moves.TaskID(seg)); err == nil {
		t.Errorf("task %+v left after the next tick", rec)
	}
}

// waitEnded waits until the runner's move of seg has ended: its task
// recorded done and the runner no longer running it.
func waitEnded(ctx context.Context, r *Runner, store *meta.Store, seg decide.SegmentID) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		rec, err := store.Task(ctx, moves.TaskID(seg))
		if err == nil && rec.State == meta.TaskDone && !r.ownMoves()[seg] {
			return nil
		}
	}
	return fmt.Errorf("the move of %v did not end", seg)
}
