package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/placement"
)

// do carries out one Action.
func (r *Runner) do(ctx context.Context, snap *Snapshot, a decide.Action, now time.Time) error {
	switch a := a.(type) {
	case decide.MarkOut:
		r.cfg.Logf("%v", a)
		return r.cfg.Store.SetNamespaceState(ctx, a.NS, placement.StateOut)
	case decide.MarkDrained:
		r.cfg.Logf("namespace %s drained: it holds no shard; `nvstripe ns rm %s` removes it", a.NS, a.NS)
		return r.cfg.Store.SetNamespaceState(ctx, a.NS, placement.StateDrained)
	case decide.AbortMove:
		r.cfg.Logf("%v", a)
		return r.abort(ctx, a.Segment)
	case decide.FinishTask:
		r.cfg.Logf("%v", a)
		return r.cfg.Store.DeleteTask(ctx, a.Task)
	case decide.Blocked:
		r.cfg.Logf("%v", a)
		return nil
	case decide.HoldOut:
		if msg := a.String(); msg != r.holdNoted {
			r.holdNoted = msg
			r.cfg.Logf("%s", msg)
		}
		return nil
	case decide.RebuildShard:
		return r.start(ctx, snap, moves.Task{Segment: a.Segment, Shard: a.Shard, Kind: decide.MoveRebuild,
			From: a.From, To: a.To, Started: now, State: meta.TaskRunning})
	case decide.MoveShard:
		return r.start(ctx, snap, moves.Task{Segment: a.Segment, Shard: a.Shard, Kind: a.Kind,
			From: a.From, To: a.To, Started: now, State: meta.TaskRunning})
	}
	return fmt.Errorf("unknown action %T: %w", a, decide.ErrInvalid)
}

// abort rolls back a move: this runner's own is cancelled (its mover rolls
// it back), any other is cleared in metadata.
func (r *Runner) abort(ctx context.Context, seg decide.SegmentID) error {
	r.mu.Lock()
	run := r.running[seg]
	r.mu.Unlock()
	if run != nil {
		run.cancel()
		return nil
	}
	vm, err := r.cfg.Store.VolumeMap(ctx, seg.Volume, nil)
	if err != nil {
		return err
	}
	// A task its owner never began has no move record to abort (ErrInvalid):
	// dropping the task is all there is to undo.
	if err := vm.AbortMove(ctx, seg.Index); err != nil && !errors.Is(err, meta.ErrInvalid) {
		return err
	}
	return r.cfg.Store.DeleteTask(ctx, moves.TaskID(seg))
}

// start hands a new move to the volume's owner (a task record it executes)
// or, for a volume nobody maps, runs it through the Mover.
func (r *Runner) start(ctx context.Context, snap *Snapshot, t moves.Task) error {
	r.mu.Lock()
	busy := r.running[t.Segment] != nil
	r.mu.Unlock()
	if busy {
		return nil
	}
	owner := snap.Owners[t.Segment.Volume]
	if old, ok := snap.MoveTasks[t.Segment]; ok && old.State == meta.TaskRunning && old.Holder == owner && owner != "" {
		return nil // handed to the owner, which has not begun it yet
	}
	if owner != "" && owner != r.cfg.Holder {
		t.Holder = owner
		r.cfg.Logf("%s/%d shard %d: %s to %s, by owner %s", t.Segment.Volume, t.Segment.Index, t.Shard, t.Kind, t.To, owner)
		return r.cfg.Store.PutTask(ctx, t.Record())
	}
	if r.cfg.Mover == nil {
		return nil
	}
	t.Holder = r.cfg.Holder
	if err := r.cfg.Store.PutTask(ctx, t.Record()); err != nil {
		return err
	}
	r.cfg.Logf("%s/%d shard %d: %s to %s, by the controller", t.Segment.Volume, t.Segment.Index, t.Shard, t.Kind, t.To)
	if r.cfg.OnMove != nil {
		r.cfg.OnMove(moves.Event{Task: t})
	}
	mctx, cancel := context.WithCancel(ctx)
	run := &running{cancel: cancel, task: t}
	r.mu.Lock()
	r.running[t.Segment] = run
	r.mu.Unlock()
	r.wg.Add(1)
	go r.runMove(mctx, run)
	return nil
}

// runMove runs one move through the Mover and records its progress.
func (r *Runner) runMove(ctx context.Context, run *running) {
	defer r.wg.Done()
	defer run.cancel()
	t := run.task
	req := moves.Request{Volume: t.Segment.Volume, Segment: t.Segment.Index, Shard: t.Shard, To: t.To,
		Progress: func(done, total int64) { r.progress(ctx, run, done, total) }}
	if r.cfg.Pacer != nil {
		req.Pace = r.cfg.Pacer.Wait
	}
	began := time.Now()
	err := r.cfg.Mover.MoveShard(ctx, req)
	defer func() { // after the task record is final: see cleanup
		r.mu.Lock()
		delete(r.running, t.Segment)
		r.mu.Unlock()
	}()
	r.mu.Lock()
	t = run.task
	if ctx.Err() == nil {
		r.busyLocked(t.Segment.Volume, err, r.cfg.Now())
	}
	r.mu.Unlock()
	if ctx.Err() != nil {
		return // leadership lost or aborted: the next leader cleans up
	}
	ended := t.End(time.Since(began), err)
	if err != nil {
		r.cfg.Logf("%s/%d shard %d: %v", t.Segment.Volume, t.Segment.Index, t.Shard, err)
	}
	if r.cfg.OnMove != nil {
		r.cfg.OnMove(ended)
	}
	if err := r.cfg.Store.PutTask(ctx, t.Record()); err != nil {
		r.cfg.Logf("task %s: %v", moves.TaskID(t.Segment), err)
	}
}

// progress records a move's progress, writing it at most every
// ProgressEvery.
func (r *Runner) progress(ctx context.Context, run *running, done, total int64) {
	now := r.cfg.Now()
	r.mu.Lock()
	run.task.Done, run.task.Total = done, total
	t := run.task
	write := now.Sub(run.wrote) >= r.cfg.ProgressEvery || done == total
	if write {
		run.wrote = now
	}
	r.mu.Unlock()
	if write && ctx.Err() == nil {
		if err := r.cfg.Store.PutTask(ctx, t.Record()); err != nil && ctx.Err() == nil {
			r.cfg.Logf("task %s: %v", moves.TaskID(t.Segment), err)
		}
	}
}

// ownMoves is the set of segments this runner's own moves run on now.
func (r *Runner) ownMoves() map[decide.SegmentID]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	mine := map[decide.SegmentID]bool{}
	for id := range r.running {
		mine[id] = true
	}
	return mine
}

// cleanup removes finished and stale task records and settles moves
// nobody carries out any more (their mover crashed or lost its lease),
// sparing mine, this runner's own moves read before snap was. That order
// matters: a move of mine that ends after snap was read left a running
// task and a move record in snap, so read after snap, the running set
// would no longer hold it and cleanup would take it for interrupted
// (deleting its task, settling a move that is gone). Read before, a move
// that ended since is merely spared one tick, and none can start in
// between: only this tick's actions, after cleanup, start moves. A move
// leaves the running set only once its final task record is written
// (runMove), so one not in mine is in snap as it ended.
func (r *Runner) cleanup(ctx context.Context, snap *Snapshot, mine map[decide.SegmentID]bool) {
	for id, t := range snap.MoveTasks {
		owner := snap.Owners[id.Volume]
		stale := t.State != meta.TaskRunning || t.Holder != owner || owner == r.cfg.Holder
		if mine[id] || !stale {
			continue
		}
		if err := r.cfg.Store.DeleteTask(ctx, moves.TaskID(id)); err != nil {
			r.cfg.Logf("task %s: %v", moves.TaskID(id), err)
		}
		delete(snap.MoveTasks, id)
	}
	for _, s := range snap.State.Segments {
		owner := snap.Owners[s.ID.Volume]
		if s.Move == nil || mine[s.ID] || (owner != "" && owner != r.cfg.Holder) {
			continue
		}
		if err := r.settle(ctx, s.ID, owner == ""); err != nil {
			r.cfg.Logf("%s: settling an interrupted move: %v", s.ID, err)
		}
	}
}

// settle finishes a committed move or rolls an uncommitted one back, under
// the volume's ownership (a mover's, beside readers) when take is set. A
// committed move whose old slot readers may still read is left for a later
// tick.
func (r *Runner) settle(ctx context.Context, seg decide.SegmentID, take bool) error {
	var owner *meta.Owner
	if take {
		o, err := r.cfg.Store.Acquire(ctx, seg.Volume, meta.OwnerOptions{Holder: r.cfg.Holder, Mover: true, TTL: r.cfg.LeaderTTL})
		if errors.Is(err, meta.ErrBusy) {
			return nil // mapped meanwhile: the new owner settles it on open
		} else if err != nil {
			return err
		}
		defer o.Release(context.WithoutCancel(ctx))
		owner = o
	}
	vm, err := r.cfg.Store.VolumeMap(ctx, seg.Volume, owner)
	if err != nil {
		return err
	}
	rec, err := vm.Segment(ctx, seg.Index)
	if err != nil || rec.Move == nil {
		return err
	}
	r.cfg.Logf("%s: settling an interrupted move of shard %d (committed %v)", seg, rec.Move.Shard, rec.Move.Committed())
	if rec.Move.Committed() {
		err = vm.FinishMove(ctx, seg.Index)
		if errors.Is(err, meta.ErrReadersBehind) {
			r.cfg.Logf("%s: %v: tried again next tick", seg, err)
			return nil
		}
		return err
	}
	return vm.AbortMove(ctx, seg.Index)
}
