package volclient

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/placement"
)

// runController starts a leading controller whose liveness signal is a TCP
// probe of the namespaces' paths, with test timings (down after 300ms of
// silence, out one second later). It stops when the test ends.
func runController(t testing.TB, store *meta.Store) {
	t.Helper()
	runControllerLog(t, store, func(f string, a ...any) { t.Logf("controller: "+f, a...) })
}

// runControllerLog is runController logging to logf.
func runControllerLog(t testing.TB, store *meta.Store, logf func(string, ...any)) {
	t.Helper()
	startCtl(t, store, "ctl", nil, logf)
}

// startCtl starts a controller named holder whose own moves are paced by
// pacer (nil: unpaced); it stops when the test ends.
func startCtl(t testing.TB, store *meta.Store, holder string, pacer *moves.Pacer, logf func(string, ...any)) *controller.Runner {
	t.Helper()
	mover := NewTaskMover(store, OpenOptions{Holder: holder, LeaseTTL: 2 * time.Second,
		Namespaces: NamespaceOptions{ControllerLossTimeout: time.Second, ConnectTimeout: 2 * time.Second}})
	r, err := controller.NewRunner(controller.RunnerConfig{Store: store, Holder: holder, Mover: mover, Pacer: pacer,
		Interval: 100 * time.Millisecond, LeaderTTL: 2 * time.Second,
		Decide: decide.Config{OutAfter: time.Second}, Probe: controller.ProbeTCP(200 * time.Millisecond),
		Health: health.TrackerConfig{Grace: 300 * time.Millisecond},
		Logf:   logf})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// waitRebuilt waits until no shard of volume v sits on namespace ns, no move
// is in flight and no task is left.
func waitRebuilt(t testing.TB, store *meta.Store, ns string) {
	t.Helper()
	waitRebuiltState(t, store, ns, "out")
}

// waitRebuiltState is waitRebuilt for namespace ns in state state.
func waitRebuiltState(t testing.TB, store *meta.Store, ns, state string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute) // a hang guard: CI machines are slow under -race
	for {
		snap, err := controller.LoadSnapshot(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		left := shardsLeft(snap, ns)
		if left == 0 && len(snap.Tasks) == 0 && snap.Namespaces[ns].State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rebuild not done: %d shards or moves left, %d tasks, %s is %s", left, len(snap.Tasks), ns, snap.Namespaces[ns].State)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shardsLeft counts the shards of volume "v" still on namespace ns, plus
// its moves in flight.
func shardsLeft(snap *controller.Snapshot, ns string) int {
	left := 0
	for _, s := range snap.Segments["v"] {
		for _, sl := range s.Slots {
			if sl.NS == ns {
				left++
			}
		}
		if s.Move != nil {
			left++
		}
	}
	return left
}

func fillVolume(t *testing.T, m *Mapped, size int) []byte {
	t.Helper()
	model := make([]byte, size)
	rand.New(rand.NewSource(3)).Read(model)
	if err := m.Volume.WriteAt(context.Background(), model, 0); err != nil {
		t.Fatal(err)
	}
	return model
}

// writeUnmapped maps a new volume of size (openVolume) with o, fills it
// (fillVolume) and unmaps it; it returns the data and a host holding
// shards of it.
func (tc *testCluster) writeUnmapped(t *testing.T, size int, o OpenOptions) ([]byte, int) {
	t.Helper()
	m := tc.openVolume(t, int64(size), 64<<10, o)
	model := fillVolume(t, m, size)
	victim := tc.hostWithShards(t, m)
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return model, victim
}

// writeOnce maps volume name read-write, writes data at its start and
// unmaps it.
func writeOnce(ctx context.Context, t *testing.T, store *meta.Store, name string, data []byte) {
	t.Helper()
	w, err := OpenVolume(ctx, store, name, testOpenOptions("writer"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Volume.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func verifyVolume(t *testing.T, m *Mapped, model []byte) {
	t.Helper()
	got := make([]byte, len(model))
	if err := m.Volume.ReadAt(context.Background(), got, 0); err != nil || !bytes.Equal(got, model) {
		t.Fatalf("read back: err %v, equal %v", err, bytes.Equal(got, model))
	}
}

// TestControllerRebuildsUnmappedVolume kills a target under a 4+2 volume
// nobody maps: the controller sees it silent, marks its namespace down then
// out, opens the volume itself and reconstructs the lost shards elsewhere;
// the data then reads back with two more targets gone.
func TestControllerRebuildsUnmappedVolume(t *testing.T) {
	t.Parallel()
	const size = 32 << 20
	tc := newTestCluster(t, 8, 64<<20, 4<<20)
	ctx := context.Background()
	opts := testOpenOptions("writer")
	model, victim := tc.writeUnmapped(t, size, opts)
	runController(t, tc.store)
	tc.targets[victim].Close()
	waitRebuilt(t, tc.store, fmt.Sprintf("h%d-n1", victim))

	m, err := OpenVolume(ctx, tc.store, "v", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	tc.checkDistinctHosts(t, m)
	checkNoLeakedSlots(t, tc.store)
	verifyVolume(t, m, model) // also connects every namespace
	for _, h := range tc.twoOtherHosts(victim) {
		tc.targets[h].Close()
	}
	verifyVolume(t, m, model)
}

// TestOwnerExecutesRebuildTask kills a target under a mapped 4+2 volume: the
// controller hands the rebuild to the owner through task records, the owner
// (ServeTasks) reconstructs the shards while the volume stays in use, and
// the data reads back with two more targets gone.
func TestOwnerExecutesRebuildTask(t *testing.T) {
	t.Parallel()
	const size = 32 << 20
	tc := newTestCluster(t, 8, 64<<20, 4<<20)
	ctx := context.Background()
	m := tc.openVolume(t, size, 64<<10, testOpenOptions("node1"))
	model := fillVolume(t, m, size)
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	var moves atomic.Int64
	go func() {
		served <- m.ServeTasks(sctx, tc.store, TaskOptions{Holder: "node1", Interval: 100 * time.Millisecond,
			Logf: func(f string, a ...any) { moves.Add(1); t.Logf("owner: "+f, a...) }})
	}()
	runController(t, tc.store)
	victim := tc.hostWithShards(t, m)
	tc.targets[victim].Close()
	waitRebuilt(t, tc.store, fmt.Sprintf("h%d-n1", victim))
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if moves.Load() == 0 {
		t.Fatal("the owner moved nothing")
	}
	if owners, _ := tc.store.Owners(ctx, "v"); len(owners) != 1 || owners[0].Holder != "node1" {
		t.Fatalf("owners %v: the controller took the mapped volume", owners)
	}
	tc.checkDistinctHosts(t, m)
	checkNoLeakedSlots(t, tc.store)
	for _, h := range tc.twoOtherHosts(victim) {
		tc.targets[h].Close()
	}
	verifyVolume(t, m, model)
}

// TestOwnerRebalancesAndDrains fills six targets under a mapped 4+2 volume,
// adds three, applies a rebalance under a verified workload (the owner
// moves the shards; the spread falls under the threshold), then drains a
// host (no shard left on it); the data verifies.
func TestOwnerRebalancesAndDrains(t *testing.T) {
	t.Parallel()
	const size, nsSize = 64 << 20, 64 << 20
	tc := newTestCluster(t, 6, nsSize, 4<<20)
	ctx := context.Background()
	m := tc.openVolume(t, size, 64<<10, testOpenOptions("node1"))
	model := fillVolume(t, m, size)
	c, err := tc.store.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 6; i < 9; i++ {
		tc.addTarget(t, c, i, nsSize)
	}
	sctx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	go m.ServeTasks(sctx, tc.store, TaskOptions{Holder: "node1", Interval: 50 * time.Millisecond})
	runController(t, tc.store)
	stop := make(chan struct{})
	wg := workload(t, m, model, stop)
	const threshold = 0.15
	if err := tc.store.PutTask(ctx, controller.RebalanceRecord("rebalance-1", threshold)); err != nil {
		t.Fatal(err)
	}
	waitTasksGone(t, tc.store)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		snap, err := controller.LoadSnapshot(ctx, tc.store)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := snap.PlanRebalance(threshold, "")
		if err == nil && plan.SpreadBefore <= threshold {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spread after rebalance %.3f (threshold %.2f), %v; used: %v", plan.SpreadBefore, threshold, err, usedSlots(snap))
		}
	}
	if err := tc.store.SetNamespaceState(ctx, "h8-n1", placement.StateDraining); err != nil {
		t.Fatal(err)
	}
	waitRebuiltState(t, tc.store, "h8-n1", "drained")
	close(stop)
	wg.Wait()
	segs, _, err := m.Map.Segments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for idx, s := range segs {
		for _, sl := range s.Slots {
			if sl.NS == "h8-n1" {
				t.Fatalf("segment %d still has a shard on the drained h8-n1", idx)
			}
		}
	}
	checkNoLeakedSlots(t, tc.store)
	verifyVolume(t, m, model)
}

// waitTasksGone waits until no task record is left and no move is in flight.
func waitTasksGone(t *testing.T, store *meta.Store) {
	t.Helper()
	time.Sleep(300 * time.Millisecond) // let the controller pick up what was just recorded
	deadline := time.Now().Add(2 * time.Minute)
	for {
		snap, err := controller.LoadSnapshot(context.Background(), store)
		if err != nil {
			t.Fatal(err)
		}
		moving := 0
		for _, s := range snap.State.Segments {
			if s.Move != nil {
				moving++
			}
		}
		if len(snap.Tasks) == 0 && moving == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tasks and %d moves left", len(snap.Tasks), moving)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkNoLeakedSlots compares every namespace's allocation count with the
// slots that segment records and moves name.
func checkNoLeakedSlots(t testing.TB, store *meta.Store) {
	t.Helper()
	snap, err := controller.LoadSnapshot(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range snap.LeakedSlots() {
		t.Error(leak)
	}
}

// TestControllerFailoverMidRebuild kills the leading controller (its etcd
// client closes, nothing is resigned or released) while it reconstructs the
// shards of a dead target into an unmapped volume, paced slowly: the second
// controller takes over once the leases expire, settles the interrupted
// moves and finishes. No slot leaks, the domain rule holds and the data
// verifies with two more targets gone.
func TestControllerFailoverMidRebuild(t *testing.T) {
	t.Parallel()
	const size = 32 << 20
	tc := newTestCluster(t, 8, 64<<20, 4<<20)
	ctx := context.Background()
	opts := testOpenOptions("writer")
	model, victim := tc.writeUnmapped(t, size, opts)
	storeA := storetest.OpenMem(t, tc.etcd, meta.Config{})
	slow, err := moves.NewPacer(moves.PacerConfig{Bandwidth: 2 << 20, Burst: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ra := startCtl(t, storeA, "ctl-a", slow, func(f string, a ...any) { t.Logf("ctl-a: "+f, a...) })
	waitUntil(t, "ctl-a leads", ra.Leading)
	rb := startCtl(t, tc.store, "ctl-b", nil, func(f string, a ...any) { t.Logf("ctl-b: "+f, a...) })
	tc.targets[victim].Close()
	waitUntil(t, "ctl-a copying", func() bool {
		ts, _ := tc.store.Tasks(ctx)
		for _, r := range ts {
			if r.Holder == "ctl-a" && r.Done > 0 && r.Done < r.Total {
				return true
			}
		}
		return false
	})
	if rb.Leading() {
		t.Fatal("two leaders")
	}
	storeA.Close() // ctl-a dies mid-rebuild
	waitRebuilt(t, tc.store, fmt.Sprintf("h%d-n1", victim))
	if !rb.Leading() {
		t.Fatal("ctl-b does not lead after the rebuild")
	}
	checkNoLeakedSlots(t, tc.store)
	m, err := OpenVolume(ctx, tc.store, "v", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	tc.checkDistinctHosts(t, m)
	verifyVolume(t, m, model)
	for _, h := range tc.twoOtherHosts(victim) {
		tc.targets[h].Close()
	}
	verifyVolume(t, m, model)
}

// waitUntil is testutil.WaitFor under this package's old name.
var waitUntil = testutil.WaitFor

// usedSlots lists used/capacity per namespace, for failure messages.
func usedSlots(snap *controller.Snapshot) string {
	var b strings.Builder
	for _, n := range snap.State.Namespaces {
		fmt.Fprintf(&b, "%s=%d/%d ", n.ID, n.Used, n.Capacity)
	}
	return b.String()
}
