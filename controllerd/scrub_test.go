package controllerd

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/memetcd"
	"github.com/nvstripe/nvstripe/meta/storetest"
)

// scrubVolume creates the checksummed volume "c" and maps it read-write as
// "node-1" (an owner that runs no scrub: the test plays its part).
func scrubVolume(t *testing.T, s *meta.Store) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.CreateVolume(ctx, meta.VolumeSpec{Name: "c", Size: 1 << 20,
		Layout: meta.Layout{K: 1, M: 0, Chunk: 4096, Checksum: meta.ChecksumCRC32C}}); err != nil {
		t.Fatal(err)
	}
	o, err := s.Acquire(ctx, "c", meta.OwnerOptions{Holder: "node-1", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Release(context.Background()) })
}

// endScrub ends volume c's scrub as its owner does, at ended.
func endScrub(t *testing.T, s *meta.Store, ended time.Time) {
	t.Helper()
	ctx := context.Background()
	tk, err := s.Task(ctx, meta.ScrubTaskID("c"))
	if err != nil {
		t.Fatal(err)
	}
	tk.State, tk.Ended = meta.TaskDone, ended.Format(time.RFC3339)
	if err := s.PutTask(ctx, tk); err != nil {
		t.Fatal(err)
	}
}

// TestScrubStartsOnce: of two schedules that find the same scrub due, one
// starts it; a schedule that found it due before another started it, and
// its owner ended it, starts no second one.
func TestScrubStartsOnce(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	scrubVolume(t, s)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	week := 7 * 24 * time.Hour
	due := func() []dueScrub {
		t.Helper()
		d, err := dueScrubs(ctx, s, now, week)
		if err != nil || len(d) != 1 {
			t.Fatalf("due: %v (%v), want c", d, err)
		}
		return d
	}
	start := func(d []dueScrub, want string) {
		t.Helper()
		if got, err := startScrubs(ctx, s, d); err != nil || fmt.Sprint(got) != want {
			t.Fatalf("started %v (%v), want %s", got, err, want)
		}
	}
	a, b := due(), due()
	start(a, "[c]")
	start(b, "[]") // decided from the same (absent) record
	endScrub(t, s, now.Add(-week))
	a, b = due(), due()
	start(a, "[c]")
	endScrub(t, s, now) // the owner ended the scrub a started
	start(b, "[]")      // b decided before that: not a second scrub this week
	if tk, err := s.Task(ctx, meta.ScrubTaskID("c")); err != nil || tk.State != meta.TaskDone {
		t.Fatalf("task %+v (%v), want the ended scrub", tk, err)
	}
}

// scrubDaemon is a controller daemon run by a test, with its own etcd
// client, counting the scrubs it starts.
type scrubDaemon struct {
	d       *Daemon
	started atomic.Int64
	stop    context.CancelFunc
	done    chan struct{}
}

func startScrubDaemon(t *testing.T, eps *memetcd.Server, holder string) *scrubDaemon {
	t.Helper()
	s := storetest.OpenMem(t, eps, meta.Config{})
	sd := &scrubDaemon{done: make(chan struct{})}
	logf := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		if strings.HasPrefix(line, "volume c: scrub started") {
			sd.started.Add(1)
		}
		t.Logf("%s: %s", holder, line)
	}
	d, err := New(context.Background(), Options{ScrubInterval: time.Hour,
		Runner: controller.RunnerConfig{Store: s, Holder: holder, Interval: 50 * time.Millisecond, LeaderTTL: time.Second, Logf: logf}})
	if err != nil {
		t.Fatal(err)
	}
	sd.d = d
	sd.d.scrubCheck = 5 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	sd.stop = func() { cancel(); <-sd.done }
	go func() { defer close(sd.done); sd.d.Run(ctx) }()
	t.Cleanup(sd.stop)
	return sd
}

// TestScrubScheduleTwoControllers: two controllers schedule the scrubs of
// one etcd. Each time the scrub is due one of them starts it, and none
// starts another before the interval has passed since it ended, also when
// its owner ends it at once. Once the leader stops, the other goes on.
func TestScrubScheduleTwoControllers(t *testing.T) {
	s, eps := newStoreEps(t)
	scrubVolume(t, s)
	ds := []*scrubDaemon{startScrubDaemon(t, eps, "c1"), startScrubDaemon(t, eps, "c2")}
	starts := func() int64 { return ds[0].started.Load() + ds[1].started.Load() }
	// settle waits until every running daemon has checked twice more:
	// one whole check began after the caller's last write.
	settle := func() {
		t.Helper()
		var want []int64
		for _, d := range ds {
			want = append(want, d.d.scrubPasses.Load()+2)
		}
		waitUntil(t, "two more checks of each controller", func() bool {
			for i, d := range ds {
				if d.d.scrubPasses.Load() < want[i] {
					return false
				}
			}
			return true
		})
	}
	expect := func(n int64) {
		t.Helper()
		waitUntil(t, fmt.Sprintf("scrub start %d", n), func() bool { return starts() >= n })
		settle()
		if got := starts(); got != n {
			t.Fatalf("%d scrubs started, want %d", got, n)
		}
	}
	expect(1) // none ran yet
	for round := int64(1); round <= 20; round++ {
		endScrub(t, s, time.Now()) // ended at once: due again in an hour
		settle()
		if got := starts(); got != round {
			t.Fatalf("round %d: %d scrubs started, want %d (one started again within the interval)", round, got, round)
		}
		endScrub(t, s, time.Now().Add(-2*time.Hour)) // due
		expect(round + 1)
	}
	waitUntil(t, "a leader", func() bool { return ds[0].d.Runner().Leading() || ds[1].d.Runner().Leading() })
	leader, other := ds[0], ds[1]
	if other.d.Runner().Leading() {
		leader, other = other, leader
	}
	leader.stop()
	ds = []*scrubDaemon{other}
	before := other.started.Load()
	endScrub(t, s, time.Now().Add(-2*time.Hour))
	waitUntil(t, "the other controller to start the scrub", func() bool { return other.started.Load() > before })
}

// waitUntil is testutil.WaitFor under this package's old name.
var waitUntil = testutil.WaitFor
