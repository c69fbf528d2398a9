package admin

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/rpctest"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/memetcd"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/placement"
)

// fixture records hosts h0..h(hosts-1) with one 64 MiB namespace each and
// a 4+2 volume of 4 segments, on an in-memory etcd.
func fixture(t *testing.T, hosts int) *meta.Store {
	t.Helper()
	return fixtureAt(t, metatest.Mem(t), "adm", hosts)
}

// fixtureAt is fixture in cluster of etcd.
func fixtureAt(t testing.TB, etcd *memetcd.Server, cluster string, hosts int) *meta.Store {
	t.Helper()
	s := storetest.OpenMem(t, etcd, meta.Config{Cluster: cluster})
	storetest.Init(t, s, meta.InitOptions{SlotSize: 1 << 20})
	for i := range hosts {
		h := fmt.Sprintf("h%d", i)
		storetest.AddHost(t, s, nil, meta.NamespaceSpec{Host: h, NQN: "nqn.test:" + h, NSID: 1, Size: 64 << 20,
			Paths: []meta.PathRecord{{Addr: "tcp://127.0.0.1:1"}}})
	}
	storetest.AddVolume(t, s, meta.VolumeSpec{Name: "v", Size: 16 << 20, Layout: meta.Layout{K: 4, M: 2, Chunk: 64 << 10}}, 4)
	return s
}

// serve starts the admin API on a unix socket and returns a client.
func serve(t *testing.T, s *meta.Store) *Client {
	t.Helper()
	addr, stop, err := Listen(s, "unix:"+filepath.Join(t.TempDir(), "admin.sock"), TLSFiles{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	c, err := Dial(addr, TLSFiles{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestStandardServices: reflection lists the Admin service (what `grpcurl
// ADDR list` asks) and health answers SERVING.
func TestStandardServices(t *testing.T) {
	rpctest.CheckStandard(t, serve(t, fixture(t, 6)).Conn(), ServiceName)
}

// TestOverGRPC runs every operation through the server and checks its
// effect in etcd, and that errors arrive with the service's message.
func TestOverGRPC(t *testing.T) {
	s := fixture(t, 8)
	c := serve(t, s)
	ctx := context.Background()
	st, err := c.Status(ctx, &StatusRequest{})
	if err != nil || st.Revision <= 0 || len(st.Volumes) != 1 || len(st.Namespaces) != 8 || st.Leader != "" {
		t.Fatalf("status: %v, %v", st, err)
	}
	if v := st.Volumes[0]; v.Volume != "v" || v.K != 4 || v.M != 2 || v.Segments != 4 || v.Health != "healthy" {
		t.Errorf("volume status %v", v)
	}
	if _, err := c.Fail(ctx, &FailRequest{Ns: "h0-n1"}); err != nil {
		t.Fatal(err)
	}
	d, err := c.Drain(ctx, &DrainRequest{Name: "h1"})
	if err != nil || !slices.Equal(d.Namespaces, []string{"h1-n1"}) {
		t.Fatalf("drain h1: %v, %v", d, err)
	}
	nss, err := s.Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, n := range nss {
		states[n.ID] = n.State
	}
	if states["h0-n1"] != placement.StateFailed.String() || states["h1-n1"] != placement.StateDraining.String() || states["h2-n1"] != "in" {
		t.Errorf("namespace states %v", states)
	}
	_, err = c.Drain(ctx, &DrainRequest{Name: "h0-n1"})
	if err == nil || !strings.HasPrefix(err.Error(), "controller admin API: namespace h0-n1 is failed: only a namespace in service") {
		t.Errorf("drain of a failed namespace: %v", err)
	}
	if _, err := c.Rebalance(ctx, &RebalanceRequest{Threshold: 2}); err == nil || !strings.Contains(err.Error(), "want a fraction") {
		t.Errorf("rebalance threshold 2: %v", err)
	}
	if rep, err := c.Rebalance(ctx, &RebalanceRequest{Threshold: 0.5}); err != nil || rep.Task != "" {
		t.Errorf("rebalance: %v, %v", rep, err)
	}
}

// TestServiceErrors checks the classes of the local Service's errors.
func TestServiceErrors(t *testing.T) {
	svc := NewService(fixture(t, 6))
	ctx := context.Background()
	if _, err := svc.Drain(ctx, &DrainRequest{Name: "nope"}); !errors.Is(err, meta.ErrNotFound) {
		t.Errorf("drain nope: %v", err)
	}
	// 4+2 on six hosts: the shards of a drained host have nowhere to go.
	// Refused before any state changes, naming the fix.
	if _, err := svc.Drain(ctx, &DrainRequest{Name: "h0"}); !errors.Is(err, ErrNoRoom) || !errors.Is(err, meta.ErrInvalid) ||
		!strings.Contains(err.Error(), "usable failure domains") || !strings.Contains(err.Error(), "add a host") {
		t.Errorf("drain h0 with no room: %v", err)
	}
	if st, err := svc.Status(ctx, &StatusRequest{}); err != nil || st.Namespaces[0].Id != "h0-n1" || st.Namespaces[0].State != "in" {
		t.Errorf("after a refused drain: %v, %v", st.GetNamespaces(), err)
	}
	if _, err := svc.Rebalance(ctx, &RebalanceRequest{Threshold: 0}); !errors.Is(err, meta.ErrInvalid) {
		t.Errorf("rebalance threshold 0: %v", err)
	}
	if _, err := svc.Fail(ctx, &FailRequest{Ns: "nope-n1"}); !errors.Is(err, meta.ErrNotFound) {
		t.Errorf("fail nope-n1: %v", err)
	}
}

// TestRebalanceProgress: a rebalance task's progress is the share of its
// planned shard data no longer left to move: none at first, all of it once
// nothing is left (here: the volume is removed).
func TestRebalanceProgress(t *testing.T) {
	ctx := context.Background()
	s := fixture(t, 8)
	svc := NewService(s)
	rep, err := svc.Rebalance(ctx, &RebalanceRequest{Threshold: 0.01, Apply: true})
	if err != nil || rep.Task == "" || rep.Bytes <= 0 {
		t.Fatalf("rebalance --apply: %+v, %v", rep, err)
	}
	task := func() *TaskStatus {
		st, err := svc.Status(ctx, &StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range st.Tasks {
			if tk.Id == rep.Task {
				return tk
			}
		}
		t.Fatalf("task %s not in status", rep.Task)
		return nil
	}
	if tk := task(); tk.Total != rep.Bytes || tk.Done != 0 {
		t.Errorf("at first: done %d of %d, want 0 of %d", tk.Done, tk.Total, rep.Bytes)
	}
	if err := s.DeleteVolume(ctx, "v"); err != nil {
		t.Fatal(err)
	}
	if tk := task(); tk.Done != rep.Bytes {
		t.Errorf("with nothing left: done %d of %d", tk.Done, tk.Total)
	}
}

// TestWatch: once without an interval; with one, until the context ends;
// fn's error ends it.
func TestWatch(t *testing.T) {
	s := fixture(t, 6)
	svc := NewService(s)
	calls := 0
	count := func(st *StatusReply) error {
		calls++
		if len(st.Volumes) != 1 {
			t.Errorf("status %v", st)
		}
		return nil
	}
	if err := Watch(context.Background(), svc, 0, count); err != nil || calls != 1 {
		t.Errorf("once: %d calls, %v", calls, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err := Watch(ctx, svc, time.Millisecond, func(st *StatusReply) error {
		if count(st); calls == 3 {
			cancel()
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("watch: %d calls, %v", calls, err)
	}
	boom := errors.New("boom")
	if err := Watch(context.Background(), svc, time.Millisecond, func(*StatusReply) error { return boom }); err != boom {
		t.Errorf("fn error: %v", err)
	}
}

// TestWaitProgress: a drain's progress runs from none of the bytes its
// namespace used to all of them once it holds none; a task's ends when the
// controller removes it.
func TestWaitProgress(t *testing.T) {
	ctx := context.Background()
	s := fixture(t, 8)
	svc := NewService(s)
	st, err := svc.Status(ctx, &StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var full string
	for _, n := range st.Namespaces {
		if n.Used > 0 {
			full = n.Id
		}
	}
	rep, err := svc.Rebalance(ctx, &RebalanceRequest{Threshold: 0.01, Apply: true})
	if err != nil || rep.Task == "" {
		t.Fatalf("rebalance: %+v %v", rep, err)
	}
	var drain, task []Progress
	err = WaitProgress(ctx, svc, time.Millisecond, TaskMeasure(rep.Task), func(p Progress) error {
		if task = append(task, p); len(task) == 1 {
			return s.DeleteTask(ctx, rep.Task)
		}
		return nil
	})
	if err != nil || len(task) != 2 || task[0].Finished || !task[1].Finished || task[1].Done != rep.Bytes || task[1].Total != rep.Bytes {
		t.Errorf("task progress %+v, %v", task, err)
	}
	err = WaitProgress(ctx, svc, time.Millisecond, DrainMeasure([]string{full}), func(p Progress) error {
		if drain = append(drain, p); len(drain) == 1 {
			return s.DeleteVolume(ctx, "v")
		}
		return nil
	})
	if err != nil || len(drain) != 2 || drain[0].Done != 0 || drain[0].Total <= 0 || !drain[1].Finished || drain[1].Done != drain[0].Total {
		t.Errorf("drain progress %+v, %v", drain, err)
	}
	p := Progress{Done: 1 << 20, Total: 4 << 20, Rate: 1 << 20, ETASeconds: 3}
	if got := p.String(); got != "1 MiB of 4 MiB (25%), 1 MiB/s, ETA 3s" {
		t.Errorf("String() = %q", got)
	}
}

// TestStatusDrainedAndBack: admin drain of an empty namespace leaves it
// drained at once; a namespace back from out carries its note into the
// status and the table.
func TestStatusDrainedAndBack(t *testing.T) {
	ctx := context.Background()
	s := fixture(t, 8)
	storetest.AddHost(t, s, nil, meta.NamespaceSpec{Host: "h9", NQN: "nqn.test:h9", NSID: 1, Size: 64 << 20,
		Paths: []meta.PathRecord{{Addr: "tcp://127.0.0.1:1"}}})
	svc := NewService(s)
	st, err := svc.Status(ctx, &StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var empty, full string
	for _, n := range st.Namespaces {
		if n.Used == 0 {
			empty = n.Id
		} else {
			full = n.Id
		}
	}
	if empty == "" || full == "" {
		t.Fatalf("fixture: want an empty and a used namespace: %v", st.Namespaces)
	}
	if _, err := svc.Drain(ctx, &DrainRequest{Name: empty}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Drain(ctx, &DrainRequest{Name: full}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetNamespaceState(ctx, full, placement.StateOut); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReturnNamespace(ctx, full, time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if st, err = svc.Status(ctx, &StatusRequest{}); err != nil {
		t.Fatal(err)
	}
	states := map[string]*NamespaceStatus{}
	for _, n := range st.Namespaces {
		states[n.Id] = n
	}
	if states[empty].State != "drained" || states[full].State != "in" || !strings.Contains(states[full].Back, "slots are reinstated") {
		t.Errorf("drained %+v, returned %+v", states[empty], states[full])
	}
	var b strings.Builder
	if err := WriteStatus(&b, st); err != nil || !strings.Contains(b.String(), full+" back 2026-12-01T18:00:00Z: its ") ||
		!strings.Contains(b.String(), "63 MiB") {
		t.Errorf("status table: %v\n%s", err, b.String())
	}
}

// TestDrainText: one line per namespace now draining, or why nothing is.
func TestDrainText(t *testing.T) {
	if got := DrainText("h1", &DrainReply{Namespaces: []string{"a", "b"}}); got != "namespace a: draining\nnamespace b: draining" {
		t.Errorf("two namespaces: %q", got)
	}
	if got := DrainText("h1", &DrainReply{}); got != "host h1 has no namespace in service or draining: nothing to drain" {
		t.Errorf("none: %q", got)
	}
}

// TestWaitEndsUnfinished: a wait for a drain whose shards have nowhere to
// go ends as blocked, naming what the controller reports; one for a drain
// nobody carries out ends as timed out when its context's deadline comes.
// Before, both returned nil, as if the drain had finished.
func TestWaitEndsUnfinished(t *testing.T) {
	ctx := context.Background()
	s := fixture(t, 6)
	svc := NewService(s)
	if err := s.SetNamespaceState(ctx, "h0-n1", placement.StateDraining); err != nil { // as an older client did
		t.Fatal(err)
	}
	var seen int
	err := WaitProgress(ctx, svc, time.Millisecond, DrainMeasure([]string{"h0-n1"}), func(Progress) error { seen++; return nil })
	var we *WaitError
	if !errors.Is(err, ErrWaitBlocked) || !errors.As(err, &we) || len(we.Blocked) == 0 || !strings.HasPrefix(we.Last, "0 B of ") ||
		!strings.Contains(err.Error(), "usable failure domains") || seen != 2 {
		t.Errorf("wait for a blocked drain: %v after %d statuses", err, seen)
	}

	s = fixture(t, 8)
	svc = NewService(s)
	if _, err := svc.Drain(ctx, &DrainRequest{Name: "h0"}); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err = WaitProgress(dctx, svc, 10*time.Millisecond, DrainMeasure([]string{"h0-n1"}), func(Progress) error { return nil })
	if !errors.Is(err, ErrWaitTimedOut) || errors.Is(err, ErrWaitBlocked) || !strings.HasPrefix(err.Error(), "not finished (timed out): ") {
		t.Errorf("wait for a drain nobody carries out: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := WaitProgress(cctx, svc, time.Millisecond, DrainMeasure([]string{"h0-n1"}), func(Progress) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("interrupted wait: %v", err)
	}
}

// TestStatusChanges: what `admin status --watch` says changed between two
// refreshes.
func TestStatusChanges(t *testing.T) {
	prev := &StatusReply{Leader: "c1",
		Volumes:    []*VolumeStatus{{Volume: "a", Health: "healthy"}, {Volume: "b", Health: "healthy"}},
		Namespaces: []*NamespaceStatus{{Id: "n1", State: "in", Used: 1}, {Id: "n2", State: "in"}},
	}
	cur := &StatusReply{Leader: "c1",
		Volumes:    []*VolumeStatus{{Volume: "a", Health: "degraded by 1", Owner: "m1"}, {Volume: "c", Health: "healthy"}},
		Namespaces: []*NamespaceStatus{{Id: "n1", State: "in", Used: 2}, {Id: "n2", State: "failed"}},
		Tasks:      []*TaskStatus{{Id: "t"}}, Blocked: []string{"x"},
	}
	want := []string{"volume a: healthy, owner - -> degraded by 1, owner m1", "volume c added (healthy, owner -)", "volume b removed",
		"namespace n2: in -> failed", "tasks 0 -> 1", "blocked shards 0 -> 1"}
	if got := StatusChanges(prev, cur); !slices.Equal(got, want) {
		t.Errorf("StatusChanges =\n%q\nwant\n%q", got, want)
	}
	if got := StatusChanges(cur, cur); len(got) != 0 {
		t.Errorf("no change: %q", got)
	}
}
