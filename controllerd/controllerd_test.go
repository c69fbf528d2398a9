package controllerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/controller/admin"
	"github.com/nvstripe/nvstripe/health/pool"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/memetcd"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/volclient"
)

func TestNewNeedsStore(t *testing.T) {
	if _, err := New(context.Background(), Options{}); !errors.Is(err, meta.ErrInvalid) {
		t.Fatalf("New without a store: %v, want meta.ErrInvalid", err)
	}
}

// TestNewChecksScrubInterval: New refuses a negative ScrubInterval and one
// under MinScrubInterval (under 10ns the schedule's ticker got 0 and Run
// panicked), naming the field and what to give; 0 and MinScrubInterval are
// taken.
func TestNewChecksScrubInterval(t *testing.T) {
	s := newStore(t)
	for _, d := range []time.Duration{-time.Hour, -1, 1, 9, 999 * time.Millisecond, 0, MinScrubInterval} {
		dm, err := New(context.Background(), Options{Runner: controller.RunnerConfig{Store: s, Holder: "c1"}, ScrubInterval: d})
		if dm != nil {
			dm.Close()
		}
		bad := d != 0 && d < MinScrubInterval
		switch {
		case bad && !errors.Is(err, ErrSettings):
			t.Errorf("ScrubInterval %v: %v, want ErrSettings", d, err)
		case bad && !strings.Contains(err.Error(), "ScrubInterval "+d.String()+": give 1s or more"):
			t.Errorf("ScrubInterval %v: %q does not say what to give", d, err)
		case !bad && err != nil:
			t.Errorf("ScrubInterval %v: %v", d, err)
		}
	}
}

// newStore is an etcd with a cluster record and one namespace whose path
// leads nowhere.
func newStore(t *testing.T) *meta.Store {
	t.Helper()
	s, _ := newStoreEps(t)
	return s
}

// newStoreEps is newStore that also returns its (in-memory) etcd.
func newStoreEps(t *testing.T) (*meta.Store, *memetcd.Server) {
	t.Helper()
	eps := metatest.Mem(t)
	s := storetest.OpenMem(t, eps, meta.Config{})
	storetest.Init(t, s, meta.InitOptions{SlotSize: 1 << 20})
	storetest.AddHost(t, s, nil, meta.NamespaceSpec{Host: "h0", NQN: "nqn.2026-11.io.nvstripe:test-t0", NSID: 1, Size: 64 << 20,
		Paths: []meta.PathRecord{{Addr: "tcp://127.0.0.1:1", ANAGroup: 1, ANAState: meta.ANAOptimized}}})
	return s, eps
}

func scrape(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestDaemonLeadsAndServesMetrics starts the daemon in-process: it leads,
// its metrics say so and read the cluster from etcd, and when its context
// ends Run returns and the metrics listener is closed.
func TestDaemonLeadsAndServesMetrics(t *testing.T) {
	s := newStore(t)
	d, err := New(context.Background(), Options{
		Runner:      controller.RunnerConfig{Store: s, Holder: "c1", Interval: 50 * time.Millisecond, Logf: t.Logf},
		MetricsAddr: "127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var text string
	deadline := time.Now().Add(time.Minute) // a hang guard
	for !strings.Contains(text, `nvstripe_controller_leader{holder="c1"} 1`) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon does not lead; metrics:\n%s", text)
		}
		time.Sleep(50 * time.Millisecond)
		text = scrape(d.MetricsURL())
	}
	for _, want := range []string{"nvstripe_controller_scrape_error 0", "nvstripe_namespaces{state="} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s:\n%s", want, text)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after its context ended: %v", err)
	}
	if _, err := http.Get(d.MetricsURL()); err == nil {
		t.Error("the metrics listener still answers after Run returned")
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestDefaults: without a holder the daemon is controller.HOSTNAME, and
// without a metrics address it has no listener.
func TestDefaults(t *testing.T) {
	d, err := New(context.Background(), Options{Runner: controller.RunnerConfig{Store: newStore(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !strings.HasPrefix(d.Holder(), "controller.") || d.MetricsURL() != "" {
		t.Errorf("holder %q, metrics %q", d.Holder(), d.MetricsURL())
	}
}

// TestDefaultHolderOfOddHostnames: the default holder is a name etcd
// takes whatever the host name, so that the controller starts with default
// flags. "controller." and the host name as it was (the old default) failed
// for a name with a space, a '/', a non-ASCII letter, over 52 characters,
// or the kernel's "(none)"; an unset one is named after the machine's ids
// (meta.HostHolder).
func TestDefaultHolderOfOddHostnames(t *testing.T) {
	s := newStore(t)
	for _, c := range []struct{ host, want string }{
		{"node7", "controller.node7"},
		{"Node_7.Example.COM.", "controller.Node_7.Example.COM"},
		{"rack 2/node 7", "controller.rack-2-node-7"},
		{"nœud", "controller.n--ud"},
		{strings.Repeat("n", 60), "controller." + strings.Repeat("n", 52)},
		{"", "controller.node"},
		{"(none)", "controller.node"},
	} {
		cfg := controller.RunnerConfig{Store: s}
		if err := defaults(context.Background(), &cfg, volclient.NamespaceOptions{}, c.host); err != nil {
			t.Fatal(err)
		}
		if err := meta.CheckHolderName(cfg.Holder); err != nil {
			t.Errorf("host %q: %v", c.host, err)
		}
		if cfg.Holder != c.want && !(c.want == "controller.node" && strings.HasPrefix(cfg.Holder, "controller.node-")) {
			t.Errorf("host %q: holder %q, want %q", c.host, cfg.Holder, c.want)
		}
	}
}

// TestScrubSchedule: a checksummed volume mapped read-write gets a scrub
// task when none ran, not while one runs, not again until the interval
// has passed since it ended; format-1 and unmapped volumes get none.
func TestScrubSchedule(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for _, v := range []meta.VolumeSpec{
		{Name: "c", Size: 1 << 20, Layout: meta.Layout{K: 1, M: 0, Chunk: 4096, Checksum: meta.ChecksumCRC32C}},
		{Name: "plain", Size: 1 << 20, Layout: meta.Layout{K: 1, M: 0, Chunk: 4096}},
		{Name: "unmapped", Size: 1 << 20, Layout: meta.Layout{K: 1, M: 0, Chunk: 4096, Checksum: meta.ChecksumCRC32C}},
	} {
		if _, err := s.CreateVolume(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"c", "plain"} {
		o, err := s.Acquire(ctx, name, meta.OwnerOptions{Holder: "node-1", TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Release(ctx)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	week := 7 * 24 * time.Hour
	expect := func(when time.Time, want string) {
		t.Helper()
		got, err := startDueScrubs(ctx, s, when, week)
		if err != nil || fmt.Sprint(got) != want {
			t.Fatalf("at %v: started %v (%v), want %s", when, got, err, want)
		}
	}
	expect(now, "[c]")
	expect(now.Add(time.Minute), "[]") // running
	tk, err := s.Task(ctx, meta.ScrubTaskID("c"))
	if err != nil || tk.Holder != "node-1" {
		t.Fatalf("task %+v %v", tk, err)
	}
	tk.State, tk.Ended = meta.TaskDone, now.Add(time.Hour).Format(time.RFC3339)
	if err := s.PutTask(ctx, tk); err != nil {
		t.Fatal(err)
	}
	expect(now.Add(week), "[]")            // ended an hour after now: not a week yet
	expect(now.Add(week+time.Hour), "[c]") // a week after it ended
}

// TestGossipAndAdminAPI starts a daemon with gossip and the admin API: the
// member registers itself in etcd, the admin API answers on its socket,
// and Close leaves the pool.
func TestGossipAndAdminAPI(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	cfg := controller.RunnerConfig{Store: s, Holder: "c1", Gossip: controller.NewGossip(nil), Logf: t.Logf}
	sock := filepath.Join(t.TempDir(), "admin.sock")
	d, err := New(ctx, Options{Runner: cfg, Gossip: pool.Spec{Addr: "127.0.0.1:0", Profile: "test"}, GossipHost: "h1", AdminAddr: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.GossipAddr() == "" || d.AdminAddr() == "" {
		t.Fatalf("gossip %q, admin %q: want both", d.GossipAddr(), d.AdminAddr())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		seeds, err := s.GossipSeeds(ctx)
		if err == nil && len(seeds) == 1 && seeds[0].Addr == d.GossipAddr() && seeds[0].Host == "h1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gossip seeds %v %v: want the controller's", seeds, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := admin.Dial(d.AdminAddr(), admin.TLSFiles{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Status(ctx, &admin.StatusRequest{}); err != nil {
		t.Fatalf("admin API: %v", err)
	}
	d.Close()
	if _, err := c.Status(ctx, &admin.StatusRequest{}); err == nil {
		t.Fatal("admin API still answers after Close")
	}
	seeds, err := s.GossipSeeds(ctx)
	if err != nil || len(seeds) != 0 {
		t.Fatalf("gossip seeds after Close: %v %v, want none", seeds, err)
	}
}

// TestGossipSpecErrors checks a bad gossip setting is pool.ErrSpec, and
// gossip without the runner's Gossip is refused.
func TestGossipSpecErrors(t *testing.T) {
	s := newStore(t)
	cfg := controller.RunnerConfig{Store: s, Holder: "c1", Gossip: controller.NewGossip(nil)}
	if _, err := New(context.Background(), Options{Runner: cfg, Gossip: pool.Spec{Addr: "nowhere", Profile: "test"}}); !errors.Is(err, pool.ErrSpec) {
		t.Fatalf("bad gossip address: %v, want pool.ErrSpec", err)
	}
	cfg.Gossip = nil
	if _, err := New(context.Background(), Options{Runner: cfg, Gossip: pool.Spec{Addr: "127.0.0.1:0", Profile: "test"}}); !errors.Is(err, ErrSettings) {
		t.Fatalf("gossip without Runner.Gossip: %v, want ErrSettings", err)
	}
}

// TestScrubOrphans: no scrub is left running with nobody to run it. A
// mover (the controller moving shards of a volume only read-only mappings
// hold) is not asked to scrub; a scrub whose holder no longer maps the
// volume is ended as failed, and started again at the volume's next
// read-write owner.
func TestScrubOrphans(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.CreateVolume(ctx, meta.VolumeSpec{Name: "c", Size: 1 << 20,
		Layout: meta.Layout{K: 1, M: 0, Chunk: 4096, Checksum: meta.ChecksumCRC32C}}); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	week := 7 * 24 * time.Hour
	expect := func(want, state, holder string) {
		t.Helper()
		got, err := startDueScrubs(ctx, s, now, week)
		if err != nil || fmt.Sprint(got) != want {
			t.Fatalf("started %v (%v), want %s", got, err, want)
		}
		tk, err := s.Task(ctx, meta.ScrubTaskID("c"))
		if state == "" && errors.Is(err, meta.ErrNotFound) {
			return
		}
		if err != nil || tk.State != state || tk.Holder != holder {
			t.Fatalf("task %+v (%v), want %s at %q", tk, err, state, holder)
		}
	}
	acquire := func(o meta.OwnerOptions) *meta.Owner {
		t.Helper()
		o.TTL = 5 * time.Second
		ow, err := s.Acquire(ctx, "c", o)
		if err != nil {
			t.Fatal(err)
		}
		return ow
	}
	mover := acquire(meta.OwnerOptions{Holder: "ctl", Mover: true})
	expect("[]", "", "") // a mover runs no scrub
	if err := mover.Release(ctx); err != nil {
		t.Fatal(err)
	}
	old := acquire(meta.OwnerOptions{Holder: "node-1"})
	expect("[c]", meta.TaskRunning, "node-1")
	expect("[]", meta.TaskRunning, "node-1") // runs at its holder
	if err := old.Release(ctx); err != nil {
		t.Fatal(err)
	}
	expect("[]", meta.TaskFailed, "node-1") // node-1 unmapped it: ended
	next := acquire(meta.OwnerOptions{Holder: "node-2"})
	defer next.Release(ctx)
	expect("[c]", meta.TaskRunning, "node-2") // due again once mapped
}
