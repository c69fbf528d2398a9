package volclient

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
)

// staleTaskServer is a checksummed 2+1 volume "v" on three in-memory
// targets and the task server of its owner "node1", driven step by step
// (no poll loop), with its log lines collected.
func staleTaskServer(t *testing.T) (*taskServer, *[]string) {
	t.Helper()
	tc := newTestCluster(t, 3, 64<<20, 4<<20)
	ctx := context.Background()
	layout := meta.Layout{K: 2, M: 1, Chunk: 64 << 10, Checksum: meta.ChecksumCRC32C}
	if _, err := tc.store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: 8 << 20, Layout: layout}); err != nil {
		t.Fatal(err)
	}
	m, err := OpenVolume(ctx, tc.store, "v", testOpenOptions("node1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	lines := new([]string)
	var mu sync.Mutex
	logf := func(f string, a ...any) {
		mu.Lock()
		*lines = append(*lines, f)
		mu.Unlock()
	}
	o := TaskOptions{Holder: "node1", Interval: time.Hour, ProgressEvery: time.Hour, Logf: logf}
	return &taskServer{m: m, store: tc.store, o: o, busy: map[int64]bool{}}, lines
}

func countPrefix(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// TestScrubTaskNotRerunFromStaleList: poll lists the tasks before it
// claims the scrub, so a list read just before the last scrub here ended
// still shows that scrub running. Started from that record after the
// scrub ended, the task is not run again (TestProcessBitFlipsHealed
// failed so: the rerun wrote the first task's counts over the second's).
func TestScrubTaskNotRerunFromStaleList(t *testing.T) {
	t.Parallel()
	s, lines := staleTaskServer(t)
	ctx := context.Background()
	listed := putScrubTask(t, s.store, "node1")
	id := listed.ID
	s.startScrub(ctx, listed)
	s.wg.Wait()
	ended, err := s.store.Task(ctx, id)
	if err != nil || ended.State != meta.TaskDone {
		t.Fatalf("scrub task %+v, %v: want it done", ended, err)
	}
	s.startScrub(ctx, listed) // the stale list's record, still running
	s.wg.Wait()
	if n := countPrefix(*lines, "volume %s: scrub from"); n != 1 {
		t.Fatalf("the scrub ran %d times, want once: %q", n, *lines)
	}
	if again, err := s.store.Task(ctx, id); err != nil || *again != *ended {
		t.Fatalf("scrub task %+v, %v: want it left as it ended, %+v", again, err, ended)
	}
}

// TestMoveTaskNotRerunFromStaleList is TestScrubTaskNotRerunFromStaleList
// for a move: a move whose record says it ended is not started again from
// a list that shows it running.
func TestMoveTaskNotRerunFromStaleList(t *testing.T) {
	t.Parallel()
	s, _ := staleTaskServer(t)
	ctx := context.Background()
	var starts atomic.Int32
	s.o.OnMove = func(e moves.Event) {
		if !e.Ended {
			starts.Add(1)
		}
	}
	task := moves.Task{Segment: decide.SegmentID{Volume: "v", Index: 0}, Shard: 0, Kind: decide.MoveRebuild,
		From: "h0-n1", To: "h1-n1", Started: time.Now(), Holder: "node1", State: meta.TaskDone}
	if err := s.store.PutTask(ctx, task.Record()); err != nil {
		t.Fatal(err)
	}
	ended, err := s.store.Task(ctx, moves.TaskID(task.Segment))
	if err != nil {
		t.Fatal(err)
	}
	listed := task
	listed.State = meta.TaskRunning // as a list read before it ended showed it
	s.wg.Add(1)
	s.run(ctx, listed)
	if n := starts.Load(); n != 0 {
		t.Fatalf("the ended move was started %d times again", n)
	}
	if again, err := s.store.Task(ctx, moves.TaskID(task.Segment)); err != nil || *again != *ended {
		t.Fatalf("move task %+v, %v: want it left as it ended, %+v", again, err, ended)
	}
}
