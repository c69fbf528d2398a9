package meta

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestWatchVolume: a watch from VolumeRev's revision delivers a resize
// committed after the read, and only the record of its own volume (not
// one whose name starts with it).
func TestWatchVolume(t *testing.T) {
	s := setup(t, 3, 1, 8)
	ctx := testCtx(t)
	addVolume(t, s, "v", 2, 1, 1)
	addVolume(t, s, "v2", 2, 1, 1)
	rec, rev, err := s.VolumeRev(ctx, "v")
	if err != nil || rec.Size != 2*testSlot {
		t.Fatalf("VolumeRev: %+v %v", rec, err)
	}
	if _, err := s.ResizeVolume(ctx, "v2", 8*testSlot); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResizeVolume(ctx, "v", 4*testSlot); err != nil {
		t.Fatal(err)
	}
	ev := <-s.WatchVolume(ctx, "v", rev)
	if ev.Err != nil || ev.Record == nil || ev.Record.Name != "v" || ev.Record.Size != 4*testSlot || ev.Rev <= rev {
		t.Fatalf("first event after revision %d: %+v (record %+v)", rev, ev, ev.Record)
	}
	if _, _, err := s.VolumeRev(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("VolumeRev of a missing volume: %v, want ErrNotFound", err)
	}
}

// TestPutTaskIf: a task is written only over the record read (or none),
// ErrConflict otherwise; StartScrubIf starts a scrub only from the record
// it was decided from.
func TestPutTaskIf(t *testing.T) {
	s := setup(t, 3, 1, 8)
	ctx := testCtx(t)
	tk := &TaskRecord{ID: "t1", Kind: TaskScrub, State: TaskRunning}
	if err := s.PutTaskIf(ctx, tk, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTaskIf(ctx, tk, 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("create over an existing task: %v, want ErrConflict", err)
	}
	_, rev, err := s.TaskRev(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	tk.State = TaskDone
	if err := s.PutTaskIf(ctx, tk, rev); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTaskIf(ctx, tk, rev); !errors.Is(err, ErrConflict) {
		t.Fatalf("write over a record that changed: %v, want ErrConflict", err)
	}
	addVolume(t, s, "c", 2, 1, 1)
	o := takeOwner(t, ctx, s, "c", OwnerOptions{Holder: "node-1"})
	defer o.Release(ctx)
	if _, err := s.StartScrubIf(ctx, "c", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartScrubIf(ctx, "c", 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("second start decided from no task: %v, want ErrConflict", err)
	}
	if got, err := s.StartScrub(ctx, "c"); err != nil || got.Holder != "node-1" || got.State != TaskRunning {
		t.Fatalf("StartScrub of a running scrub: %+v %v", got, err)
	}
}

// TestWatchCompactedNamesRevisions: a watch from a compacted revision
// fails with ErrCompacted, naming the revision it was to start after and
// the one etcd compacted up to (not "revision 0").
func TestWatchCompactedNamesRevisions(t *testing.T) {
	ctx := testCtx(t)
	s, etcd := privateStore(t)
	populate(t, s, 3, 1, 4)
	addVolume(t, s, "v", 2, 1, 1)
	_, rev, err := s.VolumeRev(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResizeVolume(ctx, "v", 4*testSlot); err != nil {
		t.Fatal(err)
	}
	compacted := etcd.compact(t)
	ev := <-s.WatchVolume(ctx, "v", rev)
	want := fmt.Sprintf("after revision %d: etcd compacted its history up to revision %d", rev, compacted)
	if !errors.Is(ev.Err, ErrCompacted) || !strings.Contains(ev.Err.Error(), want) || strings.Contains(ev.Err.Error(), "revision 0") {
		t.Fatalf("watch from a compacted revision: %v; want ErrCompacted saying %q", ev.Err, want)
	}
}
