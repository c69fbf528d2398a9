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
	"github.com/nvstripe/nvstripe/internal/faultnet"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/placement"
)

// TestRunnerLeadershipLostMidRebuild cuts the leading controller off etcd
// while its moves run, one of them committed but not finished, until its
// leadership is lost, then lets it back: it stops acting, campaigns again
// and, leading again under the same name, finishes the committed move,
// rolls back the others it left and begins them again. Every lost shard is
// rebuilt exactly once (segment versions), no move record, task or
// ownership is left and no slot leaks. The Mover's successful returns are
// no such count: the committed move's call failed, though the move was
// done.
func TestRunnerLeadershipLostMidRebuild(t *testing.T) {
	eps := metaClusterOn(t, testEtcd{eps: metatest.Start(t)}, 8, 8) // a real etcd: the test cuts its connection
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := openStore(t, eps)
	lost := segmentShardsOn(t, admin, "h0-n1")
	vers := segmentVersions(t, admin)
	if err := admin.SetNamespaceState(ctx, "h0-n1", placement.StateFailed); err != nil {
		t.Fatal(err)
	}
	proxy, err := faultnet.New(strings.TrimPrefix(eps.eps[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	store := openStore(t, testEtcd{eps: []string{proxy.Addr()}})
	act := newActors()
	committed := make(chan struct{})
	var once sync.Once
	mv := &metaMover{store: store, holder: "ctl", steps: 40, step: 25 * time.Millisecond, act: act,
		afterCommit: func(ctx context.Context) { once.Do(func() { close(committed); <-ctx.Done() }) }}
	var leads, finished atomic.Int32
	r, done := runRunner(t, ctx, RunnerConfig{Store: store, Holder: "ctl", Interval: 100 * time.Millisecond, LeaderTTL: 2 * time.Second,
		Mover: mv, Decide: decide.Config{OutAfter: time.Second, MaxMovesPerNS: 1},
		Logf: func(f string, a ...any) {
			line := fmt.Sprintf(f, a...)
			if strings.HasSuffix(line, " leads") {
				leads.Add(1)
			}
			if strings.Contains(line, "settling an interrupted move") && strings.Contains(line, "(committed true)") {
				finished.Add(1)
			}
			t.Log(line)
		}})
	waitFor(t, "a move committed", func() bool {
		select {
		case <-committed:
			return true
		default:
			return false
		}
	})
	proxy.Partition()
	waitFor(t, "leadership lost", func() bool { return !r.Leading() })
	proxy.Heal()
	waitFor(t, "rebuild done", func() bool {
		n, m := shardsOn(t, admin, "h0-n1")
		ts, err := admin.Tasks(ctx)
		return n == 0 && m == 0 && err == nil && len(ts) == 0
	})
	stopRunner(t, cancel, done)
	if leads.Load() < 2 || finished.Load() == 0 {
		t.Errorf("led %d times, finished %d committed moves left behind; want leading again, finishing one", leads.Load(), finished.Load())
	}
	checkCommits(t, admin, vers, lost)
	checkNoLeaks(t, admin)
	if owners, err := admin.Owners(context.Background(), "v"); err != nil || len(owners) != 0 {
		t.Errorf("volume v owned after the rebuild: %+v, %v", owners, err)
	}
	t.Logf("the Mover returned success %d times for %d lost shards", act.movedBy("ctl"), len(lost))
}
