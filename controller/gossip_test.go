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
	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
)

// TestGossipQueue: events are stamped and queued in order; a departure
// without Meta is matched to the member's last Meta; agents and controllers
// are ignored; resume returns each target member's last event.
func TestGossipQueue(t *testing.T) {
	clock := time.Unix(1000, 0)
	g := NewGossip(func() time.Time { clock = clock.Add(time.Second); return clock })
	tgt := health.Meta{Role: health.RoleTarget, Host: "h1"}
	g.OnEvent(health.Member{Name: "h1", Status: health.StatusAlive, Meta: tgt})
	g.OnEvent(health.Member{Name: "a/agent", Status: health.StatusAlive, Meta: health.Meta{Role: health.RoleAgent, Host: "a"}})
	g.OnEvent(health.Member{Name: "h2", Status: health.StatusAlive, Meta: health.Meta{Role: health.RoleTarget, Host: "h2"}})
	g.OnEvent(health.Member{Name: "h1", Status: health.StatusDead}) // no Meta
	g.OnEvent(health.Member{Name: "unknown", Status: health.StatusDead})
	got := g.take()
	want := []memberEvent{{"h1", "h1", true, time.Unix(1001, 0)}, {"h2", "h2", true, time.Unix(1003, 0)},
		{"h1", "h1", false, time.Unix(1004, 0)}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("take = %v, want %v", got, want)
	}
	if got := g.take(); len(got) != 0 {
		t.Fatalf("second take = %v", got)
	}
	g.OnEvent(health.Member{Name: "h2", Status: health.StatusSuspect})
	got = g.resume()
	want = []memberEvent{{"h1", "h1", false, time.Unix(1004, 0)}, {"h2", "h2", true, time.Unix(1006, 0)}}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(g.take()) != 0 {
		t.Fatalf("resume = %v, want %v (and an empty queue)", got, want)
	}
	for range maxQueued + 5 {
		g.OnEvent(health.Member{Name: "h2", Status: health.StatusAlive})
	}
	if n := len(g.take()); n != maxQueued || g.Dropped() != 5 {
		t.Fatalf("queued %d, dropped %d; want %d, 5", n, g.Dropped(), maxQueued)
	}
}

// gossipPool is a controller's health.Node feeding a Gossip, and target
// nodes for some hosts of a metaCluster, all on 127.0.0.1 with ProfileTest.
type gossipPool struct {
	t      *testing.T
	logf   func(string, ...any)
	gossip *Gossip
	ctl    *health.Node

	mu      sync.Mutex
	targets map[string]*health.Node
	ports   map[string]int
}

func newGossipPool(t *testing.T, hosts ...string) *gossipPool {
	t.Helper()
	p := &gossipPool{t: t, logf: quietAfterCleanup(t), gossip: NewGossip(nil),
		targets: map[string]*health.Node{}, ports: map[string]int{}}
	ctl, err := health.Start(health.Config{Meta: health.Meta{Role: health.RoleController, Host: "ctl"},
		Profile: health.ProfileTest, OnEvent: p.gossip.OnEvent, Logf: p.logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctl.Shutdown() })
	p.ctl = ctl
	for _, h := range hosts {
		p.start(h)
	}
	waitFor(t, "the pool to form", func() bool { return len(ctl.Members()) == len(hosts)+1 })
	return p
}

// start starts host h's target node (on its old port when it had one) and
// joins it to the controller.
func (p *gossipPool) start(h string) {
	p.t.Helper()
	p.mu.Lock()
	port := p.ports[h]
	p.mu.Unlock()
	n, err := health.Start(health.Config{Meta: health.Meta{Role: health.RoleTarget, Host: h, Namespaces: []string{"data0"}},
		BindPort: port, Profile: health.ProfileTest, Logf: p.logf})
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = n.Shutdown() })
	if _, err := n.Join([]string{p.ctl.Addr()}); err != nil {
		p.t.Fatal(err)
	}
	_, portS, _ := strings.Cut(n.Addr(), ":")
	p.mu.Lock()
	p.targets[h] = n
	fmt.Sscan(portS, &port)
	p.ports[h] = port
	p.mu.Unlock()
}

// crash stops host h's node without leaving: to the pool it goes silent.
func (p *gossipPool) crash(h string) {
	p.mu.Lock()
	n := p.targets[h]
	p.mu.Unlock()
	if err := n.Shutdown(); err != nil {
		p.t.Error(err)
	}
}

// sees reports whether the controller's node counts h alive.
func (p *gossipPool) sees(h string) bool {
	for _, m := range p.ctl.Members() {
		if m.Name == h {
			return true
		}
	}
	return false
}

// quietAfterCleanup is testutil.Logf under this package's old name.
var quietAfterCleanup = testutil.Logf

// probeLog is a Probe that answers alive and records the hosts it probed.
type probeLog struct {
	mu     sync.Mutex
	probed map[string]int
}

func (l *probeLog) probe(_ context.Context, ns *meta.NamespaceRecord) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.probed[ns.Host]++
	return true
}

func (l *probeLog) count(h string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.probed[h]
}

// victimHost returns a host among hosts that holds shards of "v".
func victimHost(t *testing.T, store *meta.Store, hosts ...string) string {
	t.Helper()
	for _, h := range hosts {
		if n, _ := shardsOn(t, store, h+"-n1"); n > 0 {
			return h
		}
	}
	t.Fatalf("none of %v holds shards", hosts)
	return ""
}

func nsState(t *testing.T, store *meta.Store, ns string) string {
	t.Helper()
	n, err := store.Namespace(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	return n.State
}

// TestRunnerGossipDownBackOut runs real gossip nodes: a target that crashes
// (no Leave) is seen dead by gossip and its namespace goes down after Grace;
// it rejoins while down and is back in, nothing moved; it crashes again and
// stays away: out after OutAfter, its shards rebuilt. Hosts in the gossip
// pool are never TCP-probed; the others still are (the fallback).
//
// Moves are counted in metadata (checkCommits), not by the Mover's returns:
// the rebuild shows done in etcd before the Mover's client has the reply of
// its last FinishMove, and stopping the runner then made that move return
// context.Canceled, uncounted ("3 moves for 4 lost shards").
func TestRunnerGossipDownBackOut(t *testing.T) {
	eps := metaCluster(t, 8, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := openStore(t, eps)
	pool := newGossipPool(t, "h1", "h2", "h3")
	victim := victimHost(t, admin, "h1", "h2", "h3")
	lost := segmentShardsOn(t, admin, victim+"-n1")
	vers := segmentVersions(t, admin)
	store := openStore(t, eps)
	act := newActors()
	probes := &probeLog{probed: map[string]int{}}
	r, done := runRunner(t, ctx, RunnerConfig{Store: store, Holder: "ctl", Interval: 50 * time.Millisecond, LeaderTTL: 2 * time.Second,
		Mover:  &metaMover{store: store, holder: "ctl", steps: 2, step: time.Millisecond, act: act},
		Decide: decide.Config{OutAfter: 3 * time.Second}, Health: health.TrackerConfig{Grace: 200 * time.Millisecond},
		Gossip: pool.gossip, Probe: probes.probe, Logf: pool.logf})
	waitFor(t, "leading and probing", func() bool { return r.Leading() && probes.count("h0") > 0 })

	pool.crash(victim)
	waitFor(t, victim+" down", func() bool { return nsState(t, admin, victim+"-n1") == "down" })
	pool.start(victim)
	waitFor(t, victim+" back in", func() bool { return nsState(t, admin, victim+"-n1") == "in" })
	if moved := act.movedBy("ctl"); moved != 0 {
		t.Fatalf("%d moves for a host down shorter than OutAfter", moved)
	}
	checkCommits(t, admin, vers, nil)

	pool.crash(victim)
	waitFor(t, victim+" out, rebuilt and its tasks ended", func() bool {
		n, m := shardsOn(t, admin, victim+"-n1")
		ts, err := admin.Tasks(ctx)
		return nsState(t, admin, victim+"-n1") == "out" && n == 0 && m == 0 && err == nil && len(ts) == 0
	})
	stopRunner(t, cancel, done)
	checkCommits(t, admin, vers, lost)
	for _, h := range []string{"h1", "h2", "h3"} {
		if n := probes.count(h); n != 0 {
			t.Errorf("host %s gossips but was TCP-probed %d times", h, n)
		}
	}
	if probes.count("h4") == 0 {
		t.Error("host h4 does not gossip and was never probed")
	}
	checkNoLeaks(t, admin)
}

// TestRunnerGossipFlapping crashes and restarts a real gossip node again
// and again: after its second silence it counts as flapping and is held
// down, goes out once and each of its shards is rebuilt exactly once (no
// start-abort loop), although it keeps coming back.
func TestRunnerGossipFlapping(t *testing.T) {
	eps := metaCluster(t, 8, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := openStore(t, eps)
	pool := newGossipPool(t, "h1", "h2")
	victim := victimHost(t, admin, "h1", "h2")
	lost := segmentShardsOn(t, admin, victim+"-n1")
	vers := segmentVersions(t, admin)
	store := openStore(t, eps)
	act := newActors()
	var aborts, ups atomic.Int32
	r, done := runRunner(t, ctx, RunnerConfig{Store: store, Holder: "ctl", Interval: 50 * time.Millisecond, LeaderTTL: 2 * time.Second,
		Mover:  &metaMover{store: store, holder: "ctl", steps: 4, step: 20 * time.Millisecond, act: act},
		Decide: decide.Config{OutAfter: 3 * time.Second}, Gossip: pool.gossip,
		Health: health.TrackerConfig{Grace: 100 * time.Millisecond, FlapLimit: 2, FlapWindow: time.Minute, StableFor: time.Minute},
		Logf: countAborts(&aborts, func(f string, a ...any) {
			if line := fmt.Sprintf(f, a...); strings.Contains(line, "-> in") {
				ups.Add(1)
			}
			pool.logf(f, a...)
		})})
	waitFor(t, "leading", r.Leading)
	flaps := 0
	flap := func() {
		pool.crash(victim)
		waitFor(t, victim+" seen dead and down", func() bool {
			return !pool.sees(victim) && nsState(t, admin, victim+"-n1") != "in"
		})
		pool.start(victim)
		waitFor(t, victim+" seen back", func() bool { return pool.sees(victim) })
		flaps++
	}
	for {
		flap()
		n, m := shardsOn(t, admin, victim+"-n1")
		if nsState(t, admin, victim+"-n1") == "out" && n == 0 && m == 0 {
			break
		}
		if flaps > 40 {
			t.Fatalf("%s not out and rebuilt after %d flaps", victim, flaps)
		}
	}
	flap() // it goes on flapping: nothing more may happen
	flap()
	if st := nsState(t, admin, victim+"-n1"); st != "out" {
		t.Errorf("%s-n1 is %s after more flaps, want out", victim, st)
	}
	stopRunner(t, cancel, done)
	checkCommits(t, admin, vers, lost)
	if aborts.Load() != 0 {
		t.Errorf("%d moves aborted", aborts.Load())
	}
	if ups.Load() != 1 {
		t.Errorf("%s was put back in %d times in %d flaps; want once (before it counted as flapping)", victim, ups.Load(), flaps)
	}
	checkNoLeaks(t, admin)
}
