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
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/placement"
)

// countingMover counts the moves asked of it, by volume.
type countingMover struct {
	Mover
	mu    sync.Mutex
	calls map[string]int
}

func (m *countingMover) MoveShard(ctx context.Context, req moves.Request) error {
	m.mu.Lock()
	m.calls[req.Volume]++
	m.mu.Unlock()
	return m.Mover.MoveShard(ctx, req)
}

func (m *countingMover) count(vol string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[vol]
}

// TestRunnerReadOnlyMapped: volume v is mapped read-only only (no
// read-write owner) and one of its namespaces fails. The controller is no
// longer held back by the reader: its Mover takes v beside the reader and
// rebuilds it, as it rebuilds w, and nothing says v is held back. The
// reader does not follow at first (it publishes no applied revision): every
// lost shard is moved and committed, but no old slot is released, the
// committed moves stay (never aborted) and the failed namespace keeps its
// slots allocated. Once the reader publishes the revision it has applied,
// the moves finish and no slot leaks.
func TestRunnerReadOnlyMapped(t *testing.T) {
	eps := metaCluster(t, 8, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := openStore(t, eps)
	addVolume(t, admin, "w", 4)
	failed, lost := "", 0
	for _, h := range []string{"h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7"} {
		nv, _ := volumeShardsOn(t, admin, "v", h+"-n1")
		nw, _ := volumeShardsOn(t, admin, "w", h+"-n1")
		if nv > 0 && nw > 0 {
			failed, lost = h+"-n1", nv
			break
		}
	}
	if failed == "" {
		t.Fatal("no namespace holds shards of both v and w")
	}
	// The default TTL: a reader whose lease expires holds nothing back.
	reader, err := admin.Acquire(ctx, "v", meta.OwnerOptions{Holder: "reader", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Release(context.WithoutCancel(ctx))
	if err := admin.SetNamespaceState(ctx, failed, placement.StateFailed); err != nil {
		t.Fatal(err)
	}
	store := openStore(t, eps)
	mv := &countingMover{Mover: &metaMover{store: store, holder: "ctl", steps: 2, step: time.Millisecond, act: newActors()},
		calls: map[string]int{}}
	var held atomic.Int32
	_, done := runRunner(t, ctx, RunnerConfig{Store: store, Holder: "ctl", Mover: mv, Interval: 50 * time.Millisecond,
		LeaderTTL: 2 * time.Second, Decide: decide.Config{MaxMovesPerNS: 1},
		Logf: func(f string, a ...any) {
			if strings.Contains(f, "volume %s: %s") {
				held.Add(1)
			}
			t.Logf(f, a...)
		}})
	waitFor(t, "w rebuilt", func() bool {
		n, m := volumeShardsOn(t, admin, "w", failed)
		return n == 0 && m == 0
	})
	waitFor(t, "v's lost shards moved and committed beside the reader", func() bool {
		n, m := volumeShardsOn(t, admin, "v", failed)
		return n == 0 && (m == lost || m == 0)
	})
	if _, m := volumeShardsOn(t, admin, "v", failed); m != lost {
		if err := context.Cause(reader.Context()); err != nil {
			t.Fatalf("the reader lost its lease (a busy machine?): %v", err)
		}
		t.Fatalf("%d of v's %d moves left: the others finished while the reader had not followed", m, lost)
	}
	if n := mv.count("v"); n < lost {
		t.Errorf("the mover was asked %d moves of v, want at least %d", n, lost)
	}
	if n := held.Load(); n != 0 {
		t.Errorf("said %d times that a volume is held back", n)
	}
	if used := allocated(t, admin, failed); used != int64(lost) {
		t.Errorf("%s: %d slots allocated, want v's %d old ones: released under a reader that did not follow", failed, used, lost)
	}
	checkNoLeaks(t, admin)
	now, err := admin.At(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := reader.SetApplied(ctx, now.Rev()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "v's moves finished once the reader followed", func() bool {
		n, m := volumeShardsOn(t, admin, "v", failed)
		return n == 0 && m == 0
	})
	stopRunner(t, cancel, done)
	checkNoLeaks(t, admin)
	if used := allocated(t, admin, failed); used != 0 {
		t.Errorf("%s: %d slots allocated at the end, want 0", failed, used)
	}
}

// allocated returns the slots allocated on namespace ns.
func allocated(t *testing.T, store *meta.Store, ns string) int64 {
	t.Helper()
	a, err := store.Allocation(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	return a.Used
}

// TestHoldBackBusy: a volume whose ownership the Mover found busy is left
// out of Decide's State for Interval, then twice as long after the next
// busy, until a move succeeds or a read-write owner appears; a volume
// mapped read-only only is left out while the readers stay, said once.
func TestHoldBackBusy(t *testing.T) {
	var logs []string
	r := &Runner{cfg: RunnerConfig{Interval: time.Second, Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }},
		backoff: map[string]volBackoff{}, heldNoted: map[string]string{}}
	snap := &Snapshot{Volumes: map[string]*meta.VolumeRecord{"v": {}, "w": {}}, Owners: map[string]string{},
		Readers: map[string][]string{}}
	snap.State.Segments = []decide.Segment{{ID: decide.SegmentID{Volume: "v"}}, {ID: decide.SegmentID{Volume: "w"}}}
	vols := func(at time.Duration) string {
		var out []string
		for _, s := range r.holdBack(snap, time.Unix(0, 0).Add(at)).Segments {
			out = append(out, s.ID.Volume)
		}
		return strings.Join(out, ",")
	}
	busy := fmt.Errorf("mover: %w", meta.ErrBusy)
	r.busyLocked("v", busy, time.Unix(0, 0))
	r.busyLocked("w", errors.New("other failure"), time.Unix(0, 0))
	for _, c := range []struct {
		at   time.Duration
		want string
	}{{0, "w"}, {999 * time.Millisecond, "w"}, {time.Second, "v,w"}} {
		if got := vols(c.at); got != c.want {
			t.Errorf("at %v after one busy: %q, want %q", c.at, got, c.want)
		}
	}
	r.busyLocked("v", busy, time.Unix(1, 0))
	if got, got2 := vols(2900*time.Millisecond), vols(3*time.Second); got != "w" || got2 != "v,w" {
		t.Errorf("after a second busy: %q at 2.9s, %q at 3s; want w, then v,w", got, got2)
	}
	r.busyLocked("v", busy, time.Unix(3, 0))
	snap.Owners["v"] = "agent-1" // mapped read-write: its owner runs the moves
	if got := vols(3 * time.Second); got != "v,w" {
		t.Errorf("with an owner: %q, want v,w", got)
	}
	delete(snap.Owners, "v")
	r.busyLocked("v", nil, time.Unix(3, 0))
	if got := vols(3 * time.Second); got != "v,w" {
		t.Errorf("after a successful move: %q, want v,w", got)
	}
	snap.Readers["w"] = []string{"r1", "r2"}
	for range 3 {
		if got := vols(4 * time.Second); got != "v,w" {
			t.Errorf("w mapped read-only: %q, want v,w: readers hold nothing back", got)
		}
	}
	if n := len(logs); n != 2 {
		t.Errorf("logs %q: want two busy notes", logs)
	}
}
