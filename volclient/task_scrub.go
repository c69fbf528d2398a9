package volclient

import (
	"context"
	"time"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volume"
)

// scrubTask reports whether r is a scrub of this owner's volume to start.
func (s *taskServer) scrubTask(r *meta.TaskRecord) bool {
	return r.Kind == meta.TaskScrub && r.Volume == s.m.Record.Name && r.Holder == s.o.Holder && r.State == meta.TaskRunning
}

// startScrub runs the scrub task t unless one runs already. t comes from
// a list that may have been read before the last scrub here ended, so the
// record is read again once the scrub is claimed (the last one wrote its
// end before giving up the claim): a task that ended meanwhile is not run
// again from its stale progress, which would also write that progress
// over the next task's record.
func (s *taskServer) startScrub(ctx context.Context, t *meta.TaskRecord) {
	s.mu.Lock()
	busy := s.scrubbing
	s.scrubbing = true
	s.mu.Unlock()
	if busy {
		return
	}
	s.wg.Go(func() {
		defer func() {
			s.mu.Lock()
			s.scrubbing = false
			s.mu.Unlock()
		}()
		if cur := s.reread(ctx, t.ID); cur != nil && s.scrubTask(cur) {
			s.runScrub(ctx, cur)
		}
	})
}

// runScrub scrubs the volume segment by segment from t.Done, paced like
// the moves, writing progress and what it found back to t. When ctx ends
// the task stays running at the segment reached: the next ServeTasks of
// this holder resumes it.
func (s *taskServer) runScrub(ctx context.Context, t *meta.TaskRecord) {
	v := s.m.Volume
	t.Total = v.Geometry().Segments(v.Size())
	var pace func(context.Context, int64) error
	if s.o.Pacer != nil {
		pace = s.o.Pacer.Wait
	}
	s.o.Logf("volume %s: scrub from segment %d of %d", t.Volume, t.Done, t.Total)
	var wrote time.Time
	for seg := t.Done; seg < t.Total; seg++ {
		st, err := v.Scrub(ctx, seg, seg, pace)
		s.countScrub(t, seg, st)
		if ctx.Err() != nil {
			s.putTask(context.WithoutCancel(ctx), t)
			return
		}
		if err != nil {
			t.State, t.Error, t.Ended = meta.TaskFailed, err.Error(), time.Now().UTC().Format(time.RFC3339)
			s.o.Logf("volume %s: scrub: %v", t.Volume, err)
			s.putTask(ctx, t)
			return
		}
		t.Done = seg + 1
		if time.Since(wrote) >= s.o.ProgressEvery {
			wrote = time.Now()
			s.putTask(ctx, t)
		}
	}
	t.State, t.Ended = meta.TaskDone, time.Now().UTC().Format(time.RFC3339)
	s.o.Logf("volume %s: scrub done: %d blocks bad, %d healed, %d left bad, %d parity chunks out of step rewritten, %d blocks unsettled%s",
		t.Volume, t.Found, t.Healed, t.Unhealed, t.Parity, t.Unsettled, settleHint(t.Volume, t.Unsettled))
	s.putTask(ctx, t)
}

// countScrub adds what the scrub of segment seg found itself (not what
// reads elsewhere found meanwhile) to t, and logs it when it found
// anything.
func (s *taskServer) countScrub(t *meta.TaskRecord, seg int64, st volume.ScrubStats) {
	t.Found += st.Found
	t.Healed += st.Healed
	t.Unhealed += st.Unhealed
	t.Parity += st.Parity
	t.Unsettled += st.Unsettled
	if st.Found != 0 || st.Parity != 0 || st.Unsettled != 0 {
		s.o.Logf("volume %s: scrub segment %d: %d blocks bad, %d healed, %d left bad, %d parity chunks rewritten, %d blocks unsettled",
			t.Volume, seg, st.Found, st.Healed, st.Unhealed, st.Parity, st.Unsettled)
	}
}

func (s *taskServer) putTask(ctx context.Context, t *meta.TaskRecord) {
	if err := s.store.PutTask(ctx, t); err != nil && ctx.Err() == nil {
		s.o.Logf("task %s: %v", t.ID, err)
	}
}
