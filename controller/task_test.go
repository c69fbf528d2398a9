package controller

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
)

func TestParseRebalanceTask(t *testing.T) {
	for _, kind := range []string{"rebalance", "rebalance threshold=2", "rebalance threshold=x", "rebalance 0.1"} {
		if _, ok, err := ParseTask(&meta.TaskRecord{ID: "t", Kind: kind}); !ok || !errors.Is(err, decide.ErrInvalid) {
			t.Errorf("%q: ok %v err %v, want ErrInvalid", kind, ok, err)
		}
	}
	want := decide.Task{ID: "r1", Kind: decide.TaskRebalance, Threshold: 0.05}
	for _, r := range []*meta.TaskRecord{RebalanceRecord("r1", 0.05), {ID: "r1", Kind: "rebalance threshold=0.05", State: meta.TaskRunning}} {
		if task, ok, err := ParseTask(r); !ok || err != nil || task != want {
			t.Fatalf("%+v: %+v %v %v, want %+v", r, task, ok, err, want)
		}
	}
	if r := RebalanceRecord("r1", 0.05); r.Kind != meta.TaskRebalance || r.Threshold != 0.05 {
		t.Fatalf("rebalance record %+v: want the threshold typed", r)
	}
	mv := moves.Task{Segment: decide.SegmentID{Volume: "v"}, Kind: decide.MoveRebalance, State: meta.TaskRunning}
	if _, ok, err := ParseTask(mv.Record()); ok || err != nil {
		t.Errorf("a rebalance move parsed as a rebalance task: %v %v", ok, err)
	}
}

// legacyTasks are task records as builds before the typed fields wrote
// them (Kind words), with the tasks they stand for.
func legacyTasks() (mv *meta.TaskRecord, want moves.Task, rb *meta.TaskRecord) {
	start := time.UnixMilli(1_790_000_000_123)
	mv = &meta.TaskRecord{ID: "mv-v-0", Kind: "move drain seg=0 shard=1 from=h1-n1 to=h6-n1 start=1790000000123",
		Volume: "v", Holder: "node1", Done: 5 << 20, Total: 8 << 20, State: meta.TaskRunning}
	want = moves.Task{Segment: decide.SegmentID{Volume: "v", Index: 0}, Shard: 1, Kind: decide.MoveDrain, From: "h1-n1", To: "h6-n1",
		Started: start, Holder: "node1", Done: 5 << 20, Total: 8 << 20, State: meta.TaskRunning}
	rb = &meta.TaskRecord{ID: "rb-1", Kind: "rebalance threshold=0.05", State: meta.TaskRunning}
	return mv, want, rb
}

// TestMigrateTasks writes task records as older builds did into a real
// etcd: the snapshot reads them as the tasks they were, MigrateTasks
// rewrites them in the typed form (progress and holder kept) and leaves
// the others alone, and a second run finds nothing to do.
func TestMigrateTasks(t *testing.T) {
	eps := metaCluster(t, 7, 1)
	ctx := context.Background()
	store := openStore(t, eps)
	mv, want, rb := legacyTasks()
	bad := &meta.TaskRecord{ID: "bad", Kind: "move nope seg=1", State: meta.TaskRunning}
	scrub := &meta.TaskRecord{ID: meta.ScrubTaskID("v"), Kind: meta.TaskScrub, Volume: "v", Holder: "node1", State: meta.TaskRunning}
	for _, r := range []*meta.TaskRecord{mv, rb, bad, scrub} {
		if err := store.PutTask(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := LoadSnapshot(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.MoveTasks[want.Segment]; got != want {
		t.Errorf("old move record read as %+v, want %+v", got, want)
	}
	if len(snap.State.Tasks) != 1 || snap.State.Tasks[0] != (decide.Task{ID: "rb-1", Kind: decide.TaskRebalance, Threshold: 0.05}) {
		t.Errorf("old rebalance record read as %+v", snap.State.Tasks)
	}

	n, err := MigrateTasks(ctx, store)
	if err != nil || n != 2 {
		t.Fatalf("migrate: %d rewritten, %v; want 2", n, err)
	}
	got, err := store.Task(ctx, mv.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantMove := meta.ShardMove{Kind: "drain", Segment: 0, Shard: 1, From: "h1-n1", To: "h6-n1", Started: 1_790_000_000_123}
	if got.Kind != meta.TaskMove || got.Move != wantMove || got.Holder != "node1" || got.Done != mv.Done || got.Total != mv.Total {
		t.Errorf("move task rewritten as %+v (move %+v), want kind move, %+v, holder and progress kept", got, got.Move, wantMove)
	}
	if pt, ok, err := moves.ParseTask(got); !ok || err != nil || pt != want {
		t.Errorf("rewritten move task reads %+v %v %v, want %+v", pt, ok, err, want)
	}
	if got, err := store.Task(ctx, rb.ID); err != nil || got.Kind != meta.TaskRebalance || got.Threshold != 0.05 {
		t.Errorf("rebalance task rewritten as %+v, %v", got, err)
	}
	for _, r := range []*meta.TaskRecord{bad, scrub} {
		if got, err := store.Task(ctx, r.ID); err != nil || got.Kind != r.Kind || got.Move != (meta.ShardMove{}) {
			t.Errorf("%s changed: %+v, %v", r.ID, got, err)
		}
	}
	if n, err := MigrateTasks(ctx, store); err != nil || n != 0 {
		t.Errorf("second migration: %d rewritten, %v; want none", n, err)
	}
}

// TestMigrateTaskKeepsNewerRecord: a record its owner rewrote in the typed
// form after the migration listed it (progress) is left as the owner wrote
// it.
func TestMigrateTaskKeepsNewerRecord(t *testing.T) {
	eps := metaCluster(t, 7, 1)
	ctx := context.Background()
	store := openStore(t, eps)
	_, want, _ := legacyTasks()
	want.Done = 7 << 20
	if err := store.PutTask(ctx, want.Record()); err != nil {
		t.Fatal(err)
	}
	if done, err := migrateTask(ctx, store, want.Record().ID); done || err != nil {
		t.Fatalf("migrated a typed record: %v %v", done, err)
	}
	if got, err := store.Task(ctx, want.Record().ID); err != nil || got.Done != want.Done || got.Move == (meta.ShardMove{}) {
		t.Fatalf("owner's record now %+v, %v", got, err)
	}
}

// TestRunnerMigratesTasksWhenLeading: a runner that starts leading
// rewrites an older build's move task of a mapped volume in the typed
// form, and leaves the move to the owner it was handed to (no second task,
// no abort).
func TestRunnerMigratesTasksWhenLeading(t *testing.T) {
	eps := metaCluster(t, 7, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := openStore(t, eps)
	owner, err := store.Acquire(ctx, "v", meta.OwnerOptions{Holder: "node1", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Release(context.Background())
	segs := segmentsOf(t, store)
	from := segs[0].Slots[1].NS
	mv, _, _ := legacyTasks()
	mv.Kind = "move drain seg=0 shard=1 from=" + from + " to=h6-n1 start=" + strconv.FormatInt(time.Now().UnixMilli(), 10)
	if err := store.PutTask(ctx, mv); err != nil {
		t.Fatal(err)
	}
	r, done := startRunner(t, ctx, store, "ctl", nil)
	waitFor(t, "ctl leads", r.Leading)
	waitFor(t, "the old task record rewritten", func() bool {
		got, err := store.Task(ctx, mv.ID)
		return err == nil && got.Kind == meta.TaskMove
	})
	ts, err := store.Tasks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].Holder != "node1" || ts[0].State != meta.TaskRunning || ts[0].Move.From != from || ts[0].Done != mv.Done {
		t.Errorf("tasks after the migration: %+v", ts)
	}
	stopRunner(t, cancel, done)
}
