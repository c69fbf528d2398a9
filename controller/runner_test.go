package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/memetcd"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/placement"
)

// testEtcd is where a test's stores live: an in-memory etcd, or an
// embedded one (eps) for a test that cuts the connection to it.
type testEtcd struct {
	mem *memetcd.Server
	eps []string
}

// compact compacts the etcd's history up to a new revision.
func (e testEtcd) compact(t *testing.T) {
	if e.mem == nil {
		metatest.Compact(t, e.eps)
		return
	}
	metatest.CompactMem(t, e.mem)
}

// metaCluster is an in-memory etcd with n hosts of one namespace each (no
// data path: the paths lead nowhere) and a 4+2 volume "v" with segs
// allocated segments.
func metaCluster(t *testing.T, n, segs int) testEtcd {
	t.Helper()
	return metaClusterOn(t, testEtcd{mem: metatest.Mem(t)}, n, segs)
}

// metaClusterOn is metaCluster on a given etcd.
func metaClusterOn(t *testing.T, eps testEtcd, n, segs int) testEtcd {
	t.Helper()
	store := openStore(t, eps)
	storetest.Init(t, store, meta.InitOptions{SlotSize: 1 << 20})
	for i := 0; i < n; i++ {
		addMetaHost(t, store, i)
	}
	addVolume(t, store, "v", segs)
	return eps
}

// addVolume creates volume name, 4+2 of 1 MiB slots, with segs segments
// allocated.
func addVolume(t *testing.T, store *meta.Store, name string, segs int) {
	t.Helper()
	storetest.AddVolume(t, store, meta.VolumeSpec{Name: name, Size: int64(segs) * 4 << 20,
		Layout: meta.Layout{K: 4, M: 2, Chunk: 64 << 10}}, int64(segs))
}

// addMetaHost records host hI with namespace hI-n1 of 31 slots.
func addMetaHost(t *testing.T, store *meta.Store, i int) {
	t.Helper()
	host := fmt.Sprintf("h%d", i)
	storetest.AddHost(t, store, nil, meta.NamespaceSpec{Host: host, NQN: "nqn.2026-11.io.nvstripe:" + host,
		NSID: 1, Size: 32 << 20, Paths: []meta.PathRecord{{Addr: "tcp://127.0.0.1:1", ANAGroup: 1}}})
}

func openStore(t *testing.T, e testEtcd) *meta.Store {
	t.Helper()
	if e.mem != nil {
		return storetest.OpenMem(t, e.mem, meta.Config{})
	}
	return storetest.Open(t, meta.Config{Endpoints: e.eps})
}

// actors records which controllers' movers run, to check that two never
// act at once.
type actors struct {
	mu        sync.Mutex
	active    map[string]int
	overlap   []string
	moved     map[string]int
	started   chan string
	startOnce sync.Once
}

func newActors() *actors {
	return &actors{active: map[string]int{}, moved: map[string]int{}, started: make(chan string, 1)}
}

func (a *actors) enter(holder string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for h, n := range a.active {
		if h != holder && n > 0 {
			a.overlap = append(a.overlap, holder+" while "+h)
		}
	}
	a.active[holder]++
}

// movedBy returns the moves holder's mover finished.
func (a *actors) movedBy(holder string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.moved[holder]
}

func (a *actors) leave(holder string, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.active[holder]--
	if ok {
		a.moved[holder]++
	}
}

// metaMover is a Mover without a data path: it runs the crash-safe
// metadata sequence of a move (ownership, BeginMove, progress, CommitMove,
// FinishMove, AbortMove on failure) and copies nothing.
type metaMover struct {
	store  *meta.Store
	holder string
	steps  int
	step   time.Duration
	act    *actors
	// afterCommit, when set, is called between CommitMove and FinishMove.
	afterCommit func(ctx context.Context)

	mu     sync.Mutex
	owner  *meta.Owner
	owners int
}

func (m *metaMover) acquire(ctx context.Context, vol string) (*meta.Owner, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owners == 0 {
		o, err := m.store.Acquire(ctx, vol, meta.OwnerOptions{Holder: m.holder, Mover: true, TTL: 2 * time.Second})
		if err != nil {
			return nil, err
		}
		m.owner = o
	}
	m.owners++
	return m.owner, nil
}

func (m *metaMover) release(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owners--; m.owners == 0 {
		_ = m.owner.Release(ctx)
	}
}

func (m *metaMover) MoveShard(ctx context.Context, req moves.Request) (err error) {
	m.act.enter(m.holder)
	defer func() { m.act.leave(m.holder, err == nil) }()
	o, err := m.acquire(ctx, req.Volume)
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		m.release(rctx)
	}()
	vm, err := m.store.VolumeMap(ctx, req.Volume, o)
	if err != nil {
		return err
	}
	if _, err := vm.BeginMove(ctx, req.Segment, req.Shard, req.To); err != nil {
		return err
	}
	m.act.startOnce.Do(func() { m.act.started <- m.holder })
	if err = m.copy(ctx, req); err == nil {
		err = vm.CommitMove(ctx, req.Segment)
	}
	if err == nil && m.afterCommit != nil {
		m.afterCommit(ctx)
	}
	if err != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		return errors.Join(err, vm.AbortMove(actx, req.Segment))
	}
	return vm.FinishMoveFollowed(ctx, req.Segment)
}

func (m *metaMover) copy(ctx context.Context, req moves.Request) error {
	const chunk = 64 << 10
	for i := 1; i <= m.steps; i++ {
		if req.Pace != nil {
			if err := req.Pace(ctx, chunk); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(m.step):
		}
		req.Progress(int64(i)*chunk, int64(m.steps)*chunk)
	}
	return nil
}

func startRunner(t *testing.T, ctx context.Context, store *meta.Store, holder string, mv Mover) (*Runner, chan error) {
	t.Helper()
	return runRunner(t, ctx, RunnerConfig{Store: store, Holder: holder, Mover: mv, Interval: 100 * time.Millisecond,
		LeaderTTL: 2 * time.Second, Decide: decide.Config{OutAfter: time.Second, MaxMovesPerNS: 1},
		Logf: func(f string, a ...any) { t.Logf(holder+": "+f, a...) }})
}

// countAborts returns logf that also counts in n the lines that report an
// aborted move.
func countAborts(n *atomic.Int32, logf func(string, ...any)) func(string, ...any) {
	return func(f string, a ...any) {
		if strings.HasPrefix(f, "%v") && len(a) > 0 && strings.HasPrefix(fmt.Sprint(a[0]), "abort") {
			n.Add(1)
		}
		logf(f, a...)
	}
}

// runRunner starts a runner of cfg until ctx ends; what its Run returns
// comes on the channel.
func runRunner(t *testing.T, ctx context.Context, cfg RunnerConfig) (*Runner, chan error) {
	t.Helper()
	r, err := NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return r, done
}

// stopRunner cancels a runner's context and fails t if its Run failed.
func stopRunner(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// shardsOn counts the shards of volume v on namespace ns, and the moves in
// flight.
func shardsOn(t *testing.T, store *meta.Store, ns string) (shards, moves int) {
	return volumeShardsOn(t, store, "v", ns)
}

// volumeShardsOn counts the shards of vol on namespace ns, and its moves in
// flight.
func volumeShardsOn(t *testing.T, store *meta.Store, vol, ns string) (shards, moves int) {
	t.Helper()
	segs, _ := storetest.Segments(t, store, vol)
	for _, s := range segs {
		for _, sl := range s.Slots {
			if sl.NS == ns {
				shards++
			}
		}
		if s.Move != nil {
			moves++
		}
	}
	return shards, moves
}

// segmentShardsOn maps each segment of volume "v" with shards on namespace
// ns to how many it has there.
func segmentShardsOn(t *testing.T, store *meta.Store, ns string) map[int64]int {
	t.Helper()
	out := map[int64]int{}
	for idx, s := range segmentsOf(t, store) {
		for _, sl := range s.Slots {
			if sl.NS == ns {
				out[idx]++
			}
		}
	}
	return out
}

// segmentVersions returns the version of each segment of volume "v".
func segmentVersions(t *testing.T, store *meta.Store) map[int64]int64 {
	t.Helper()
	out := map[int64]int64{}
	for idx, s := range segmentsOf(t, store) {
		out[idx] = s.Ver
	}
	return out
}

// checkCommits checks that since the versions before were read, each
// segment of volume "v" had exactly want[segment] moves committed: a
// segment's version grows by one with each CommitMove (nothing else changes
// its slots), so every lost shard was rebuilt once and nothing else moved.
// Unlike counting the Mover's successful returns, this count does not depend
// on when the runner is stopped, nor on leadership changing mid-rebuild (a
// move the old leadership committed is finished by the new one's cleanup;
// one it had not committed is rolled back and begun again).
func checkCommits(t *testing.T, store *meta.Store, before map[int64]int64, want map[int64]int) {
	t.Helper()
	for idx, s := range segmentsOf(t, store) {
		if got := s.Ver - before[idx]; got != int64(want[idx]) {
			t.Errorf("segment %d: %d moves committed, want %d (one per lost shard)", idx, got, want[idx])
		}
	}
}

func segmentsOf(t *testing.T, store *meta.Store) map[int64]*meta.SegmentRecord {
	t.Helper()
	segs, _ := storetest.Segments(t, store, "v")
	return segs
}

// checkNoLeaks compares every namespace's allocation count with the slots
// segment records and moves name, and checks the domain rule.
func checkNoLeaks(t *testing.T, store *meta.Store) {
	t.Helper()
	ctx := context.Background()
	snap, err := LoadSnapshot(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	for _, segs := range snap.Segments {
		for idx, s := range segs {
			hosts := map[string]bool{}
			for _, sl := range s.Slots {
				hosts[snap.Namespaces[sl.NS].Host] = true
			}
			if len(hosts) != len(s.Slots) {
				t.Errorf("segment %d: shards share hosts: %v", idx, s.Slots)
			}
		}
	}
	for _, leak := range snap.LeakedSlots() {
		t.Error(leak)
	}
}

// TestRunnerFailover fails a namespace, lets the leading controller start
// the rebuild, kills it (its etcd client closes without resigning) and
// checks that the second controller takes over, settles the interrupted
// moves and finishes: no shard left on the failed namespace, no slot
// leaked, and the two never moved data at once.
func TestRunnerFailover(t *testing.T) {
	eps := metaCluster(t, 8, 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := openStore(t, eps)
	lost, _ := shardsOn(t, admin, "h0-n1")
	if lost == 0 {
		t.Fatal("no shard on h0-n1")
	}
	if err := admin.SetNamespaceState(ctx, "h0-n1", placement.StateFailed); err != nil {
		t.Fatal(err)
	}
	act := newActors()
	storeA, storeB := openStore(t, eps), openStore(t, eps)
	ra, doneA := startRunner(t, ctx, storeA, "ctl-a", &metaMover{store: storeA, holder: "ctl-a", steps: 40, step: 25 * time.Millisecond, act: act})
	waitFor(t, "ctl-a leads", ra.Leading)
	rb, doneB := startRunner(t, ctx, storeB, "ctl-b", &metaMover{store: storeB, holder: "ctl-b", steps: 4, step: 10 * time.Millisecond, act: act})
	if who := <-act.started; who != "ctl-a" {
		t.Fatalf("%s moved data while ctl-a led", who)
	}
	if rb.Leading() {
		t.Fatal("two leaders")
	}
	storeA.Close() // ctl-a dies mid-rebuild
	waitFor(t, "ctl-b leads", rb.Leading)
	waitFor(t, "rebuild done", func() bool {
		n, m := shardsOn(t, admin, "h0-n1")
		ts, _ := admin.Tasks(ctx)
		return n == 0 && m == 0 && len(ts) == 0
	})
	cancel()
	for _, done := range []chan error{doneA, doneB} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	checkNoLeaks(t, admin)
	act.mu.Lock()
	defer act.mu.Unlock()
	if len(act.overlap) > 0 {
		t.Errorf("controllers acted at once: %v", act.overlap)
	}
	if act.moved["ctl-a"] >= lost || act.moved["ctl-b"] == 0 {
		t.Errorf("moves finished: %v of %d: the kill was not mid-rebuild", act.moved, lost)
	}
}

// waitFor is testutil.WaitFor under this package's old name.
var waitFor = testutil.WaitFor

// TestRunnerRebalanceAndDrain fills six namespaces, adds three, applies a
// rebalance task (the runner carries it out and removes it: the spread falls
// under the threshold), then drains a host (no shard left on it); no slot
// leaks and the domain rule holds throughout.
func TestRunnerRebalanceAndDrain(t *testing.T) {
	eps := metaCluster(t, 6, 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := openStore(t, eps)
	for i := 6; i < 9; i++ {
		addMetaHost(t, admin, i)
	}
	const threshold = 0.1
	if err := admin.PutTask(ctx, RebalanceRecord("rebalance-1", threshold)); err != nil {
		t.Fatal(err)
	}
	store := openStore(t, eps)
	_, done := startRunner(t, ctx, store, "ctl", &metaMover{store: store, holder: "ctl", steps: 2, step: time.Millisecond, act: newActors()})
	waitFor(t, "rebalance done", func() bool {
		ts, _ := admin.Tasks(ctx)
		return len(ts) == 0
	})
	snap, err := LoadSnapshot(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := 1.0, 0.0
	for _, n := range snap.State.Namespaces {
		f := float64(n.Used) / float64(n.Capacity)
		lo, hi = min(lo, f), max(hi, f)
	}
	if hi-lo > threshold {
		t.Errorf("spread %.3f after rebalance, threshold %.3f", hi-lo, threshold)
	}
	checkNoLeaks(t, admin)

	if err := admin.SetNamespaceState(ctx, "h2-n1", placement.StateDraining); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "drain done, namespace drained", func() bool {
		n, m := shardsOn(t, admin, "h2-n1")
		ts, _ := admin.Tasks(ctx)
		rec, _ := admin.Namespace(ctx, "h2-n1")
		return n == 0 && m == 0 && len(ts) == 0 && rec != nil && rec.State == placement.StateDrained.String()
	})
	if err := admin.RemoveNamespace(ctx, "h2-n1"); err != nil {
		t.Errorf("remove the drained namespace: %v", err)
	}
	stopRunner(t, cancel, done)
	checkNoLeaks(t, admin)
}

// TestRunnerProbeDownAndBack drives the liveness probe: a host that goes
// silent is marked down after Grace and back in when it answers again before
// OutAfter (no rebuild starts); one silent past OutAfter is marked out and
// its shards are rebuilt.
func TestRunnerProbeDownAndBack(t *testing.T) {
	eps := metaCluster(t, 8, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := openStore(t, eps)
	var mu sync.Mutex
	dead := map[string]bool{}
	setDead := func(host string, d bool) {
		mu.Lock()
		defer mu.Unlock()
		dead[host] = d
	}
	store := openStore(t, eps)
	act := newActors()
	r, done := runRunner(t, ctx, RunnerConfig{Store: store, Holder: "ctl", Interval: 50 * time.Millisecond, LeaderTTL: 2 * time.Second,
		Mover:  &metaMover{store: store, holder: "ctl", steps: 2, step: time.Millisecond, act: act},
		Decide: decide.Config{OutAfter: 2 * time.Second}, Health: health.TrackerConfig{Grace: 200 * time.Millisecond},
		Probe: func(_ context.Context, ns *meta.NamespaceRecord) bool {
			mu.Lock()
			defer mu.Unlock()
			return !dead[ns.Host]
		},
		Logf: t.Logf})
	waitFor(t, "leading", r.Leading)
	setDead("h1", true)
	waitFor(t, "h1 down", func() bool { return nsState(t, admin, "h1-n1") == "down" })
	setDead("h1", false)
	waitFor(t, "h1 back in", func() bool { return nsState(t, admin, "h1-n1") == "in" })
	if moved := act.movedBy("ctl"); moved != 0 {
		t.Fatalf("%d moves for a host down shorter than OutAfter", moved)
	}
	victim := victimHost(t, admin, "h2", "h3", "h4", "h5", "h6", "h7")
	setDead(victim, true)
	waitFor(t, victim+" out and rebuilt", func() bool {
		n, m := shardsOn(t, admin, victim+"-n1")
		return nsState(t, admin, victim+"-n1") == "out" && n == 0 && m == 0
	})
	setDead(victim, false)
	waitFor(t, victim+" back in, empty", func() bool { return nsState(t, admin, victim+"-n1") == "in" })
	if rec, err := admin.Namespace(ctx, victim+"-n1"); err != nil || rec.Returned == nil || rec.Returned.Slots != 0 ||
		!strings.Contains(rec.Returned.Note(), "rebuilt elsewhere; it holds no data now and takes new slots") {
		t.Errorf("returned namespace: %+v, %v", rec, err)
	}
	stopRunner(t, cancel, done)
	checkNoLeaks(t, admin)
}

// TestRunnerFlappingHost makes a host go silent and come back again and
// again: after its second silence it counts as flapping and is held down,
// goes out once, and each of its shards is rebuilt exactly once (no
// start-abort loop), although it keeps answering now and then.
func TestRunnerFlappingHost(t *testing.T) {
	eps := metaCluster(t, 8, 6)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := openStore(t, eps)
	victim := victimHost(t, admin, "h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7")
	lost := segmentShardsOn(t, admin, victim+"-n1")
	vers := segmentVersions(t, admin)
	var flapping atomic.Bool
	store := openStore(t, eps)
	act := newActors()
	var aborts atomic.Int32
	r, done := runRunner(t, ctx, RunnerConfig{Store: store, Holder: "ctl", Interval: 50 * time.Millisecond, LeaderTTL: 2 * time.Second,
		Mover:  &metaMover{store: store, holder: "ctl", steps: 4, step: 20 * time.Millisecond, act: act},
		Decide: decide.Config{OutAfter: 1500 * time.Millisecond},
		Health: health.TrackerConfig{Grace: 150 * time.Millisecond, FlapLimit: 2, FlapWindow: time.Minute, StableFor: time.Minute},
		Probe: func(_ context.Context, ns *meta.NamespaceRecord) bool {
			// The victim answers only during the first 300ms of every 700ms.
			return ns.Host != victim || !flapping.Load() || time.Now().UnixMilli()%700 < 300
		},
		Logf: countAborts(&aborts, t.Logf)})
	waitFor(t, "leading", r.Leading)
	flapping.Store(true)
	waitFor(t, victim+" out and rebuilt", func() bool {
		n, m := shardsOn(t, admin, victim+"-n1")
		return nsState(t, admin, victim+"-n1") == "out" && n == 0 && m == 0
	})
	time.Sleep(time.Second) // it goes on flapping: nothing more may happen
	stopRunner(t, cancel, done)
	checkCommits(t, admin, vers, lost)
	if aborts.Load() != 0 {
		t.Errorf("%d moves aborted", aborts.Load())
	}
	checkNoLeaks(t, admin)
}
