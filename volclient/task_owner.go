package volclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
)

// TaskOptions configure ServeTasks.
type TaskOptions struct {
	// Holder is the name this process owns the volume under
	// (OpenOptions.Holder): the controller addresses tasks to it. Required.
	Holder string
	// Interval is how often the task records are read. Default 500ms.
	Interval time.Duration
	// ProgressEvery is the least time between progress writes. Default
	// 500ms.
	ProgressEvery time.Duration
	// Pacer paces the moves (shared with the volume's foreground IO
	// latency reports through Pacer.Observe). Default nil: unpaced.
	Pacer *moves.Pacer
	// Logf receives one line per event. Default: discarded.
	Logf func(format string, args ...any)
	// OnMove hears each move start and end (moves.Log logs
	// them). Default nil.
	OnMove func(moves.Event)
}

// ServeTasks carries out the shard moves the controller addresses to this
// owner of the mapped volume (move task records whose Holder is o.Holder),
// and its scrub task (meta.TaskScrub, task_scrub.go):
// each runs MoveShardPaced, with progress (bytes of shard data) written back
// to the task, and ends as done or failed. It returns when ctx ends, after
// the moves it started have stopped (a cancelled move rolls back).
func (m *Mapped) ServeTasks(ctx context.Context, store *meta.Store, o TaskOptions) error {
	if o.Holder == "" {
		return fmt.Errorf("serve tasks: no holder: %w", meta.ErrInvalid)
	}
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 500 * time.Millisecond
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	s := &taskServer{m: m, store: store, o: o, busy: map[int64]bool{}}
	defer s.wg.Wait()
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		if err := s.poll(ctx); err != nil && ctx.Err() == nil {
			o.Logf("volume %s: reading tasks: %v", m.Record.Name, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

type taskServer struct {
	m     *Mapped
	store *meta.Store
	o     TaskOptions
	mu    sync.Mutex
	busy  map[int64]bool // segments with a move running here
	// scrubbing: a scrub task of the volume runs here (task_scrub.go).
	scrubbing bool
	wg        sync.WaitGroup
}

// poll starts the moves addressed to this owner that are not running yet.
func (s *taskServer) poll(ctx context.Context) error {
	recs, err := s.store.Tasks(ctx)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if s.scrubTask(r) {
			s.startScrub(ctx, r)
			continue
		}
		t, ok := s.moveTask(r)
		if !ok {
			continue
		}
		s.mu.Lock()
		busy := s.busy[t.Segment.Index]
		s.busy[t.Segment.Index] = true
		s.mu.Unlock()
		if !busy {
			s.wg.Add(1)
			go s.run(ctx, t)
		}
	}
	return nil
}

// moveTask reports whether r is a move of this owner's volume to run.
func (s *taskServer) moveTask(r *meta.TaskRecord) (moves.Task, bool) {
	t, ok, err := moves.ParseTask(r)
	if !ok || err != nil || t.Segment.Volume != s.m.Record.Name || t.Holder != s.o.Holder || t.State != meta.TaskRunning {
		return moves.Task{}, false
	}
	return t, true
}

// reread reads task id again, or returns nil (not there, or unreadable:
// the next poll tries again). poll lists the tasks before it claims one
// (busy, scrubbing), and the run that held the claim before may have
// ended the task in between: its last write comes before it gives the
// claim up, so the record read after claiming shows it.
func (s *taskServer) reread(ctx context.Context, id string) *meta.TaskRecord {
	r, err := s.store.Task(ctx, id)
	if err != nil {
		if !errors.Is(err, meta.ErrNotFound) && ctx.Err() == nil {
			s.o.Logf("task %s: %v", id, err)
		}
		return nil
	}
	return r
}

// run carries out one move task, as its record says once it is claimed
// (reread), and records how it ended.
func (s *taskServer) run(ctx context.Context, t moves.Task) {
	defer s.wg.Done()
	seg := t.Segment.Index
	defer func() {
		s.mu.Lock()
		delete(s.busy, seg)
		s.mu.Unlock()
	}()
	r := s.reread(ctx, moves.TaskID(t.Segment))
	if r == nil {
		return
	}
	var ok bool
	if t, ok = s.moveTask(r); !ok {
		return // ended meanwhile: a move that is done is not run again
	}
	chunk := s.m.Record.Layout.Chunk
	var wrote time.Time
	var pace func(context.Context, int64) error
	if s.o.Pacer != nil {
		pace = s.o.Pacer.Wait
	}
	s.o.Logf("volume %s: %s of segment %d shard %d to %s", t.Segment.Volume, t.Kind, t.Segment.Index, t.Shard, t.To)
	began := time.Now()
	if s.o.OnMove != nil {
		s.o.OnMove(moves.Event{Task: t})
	}
	err := s.m.MoveShardPaced(ctx, t.Segment.Index, t.Shard, t.To, pace, func(p MoveProgress) {
		t.Done, t.Total = p.Done*chunk, p.Total*chunk
		if !p.Finished && time.Since(wrote) >= s.o.ProgressEvery {
			wrote = time.Now()
			s.put(ctx, t)
		}
	})
	if ctx.Err() != nil {
		return // stopped: the controller re-plans the rolled-back move
	}
	ended := t.End(time.Since(began), err)
	if err != nil {
		s.o.Logf("volume %s: segment %d shard %d: %v", t.Segment.Volume, t.Segment.Index, t.Shard, err)
	}
	if s.o.OnMove != nil {
		s.o.OnMove(ended)
	}
	s.put(ctx, t)
}

func (s *taskServer) put(ctx context.Context, t moves.Task) {
	if err := s.store.PutTask(ctx, t.Record()); err != nil && ctx.Err() == nil {
		s.o.Logf("task %s: %v", moves.TaskID(t.Segment), err)
	}
}
