package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nvstripe/nvstripe/meta"
)

// ScrubResult is what `admin scrub` reports for one volume.
type ScrubResult struct {
	Volume  string `json:"volume"`
	Skipped string `json:"skipped,omitempty"` // why no scrub started
	Task    string `json:"task,omitempty"`
	Holder  string `json:"holder,omitempty"`
	State   string `json:"state,omitempty"` // with --wait: how it ended
	Done    int64  `json:"done_segments"`
	Total   int64  `json:"total_segments"`
	Found   int64  `json:"blocks_bad"`
	Healed  int64  `json:"blocks_healed"`
	// Unhealed: of Found, the blocks left bad (Found = Healed + Unhealed).
	Unhealed int64  `json:"blocks_unhealed"`
	Parity   int64  `json:"parity_rewritten"` // parity chunks out of step with good data
	Error    string `json:"error,omitempty"`
}

// ScrubNamed is `admin scrub [VOLUME...]`: Scrub of the named volumes, or
// ScrubAll when none is named.
func ScrubNamed(ctx context.Context, w io.Writer, s *meta.Store, names []string, wait bool) ([]ScrubResult, error) {
	if len(names) == 0 {
		return ScrubAll(ctx, w, s, wait)
	}
	return Scrub(ctx, w, s, names, true, wait)
}

// ScrubAll is Scrub of every volume, those not mapped read-write skipped.
func ScrubAll(ctx context.Context, w io.Writer, s *meta.Store, wait bool) ([]ScrubResult, error) {
	vols, err := s.Volumes(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(vols))
	for _, v := range vols {
		names = append(names, v.Name)
	}
	return Scrub(ctx, w, s, names, false, wait)
}

// Scrub starts the scrub of each volume through etcd (a task its
// read-write owner runs; volumes not mapped read-write are skipped unless
// named, which is an error then) and, with wait, waits for each to end.
// w gets one text line per event (io.Discard: none); the results are
// returned for -o json.
func Scrub(ctx context.Context, w io.Writer, s *meta.Store, names []string, named, wait bool) ([]ScrubResult, error) {
	res := []ScrubResult{}
	var started []*meta.TaskRecord
	for _, name := range names {
		t, err := s.StartScrub(ctx, name)
		if err != nil && named {
			return res, err
		}
		if err != nil {
			fmt.Fprintf(w, "volume %s: skipped: %v\n", name, err)
			res = append(res, ScrubResult{Volume: name, Skipped: err.Error()})
			continue
		}
		fmt.Fprintf(w, "volume %s: scrub running in %s (task %s)\n", name, t.Holder, t.ID)
		res = append(res, ScrubResult{Volume: name, Task: t.ID, Holder: t.Holder, State: t.State, Total: t.Total})
		started = append(started, t)
	}
	if !wait {
		return res, nil
	}
	var failed error
	for _, t := range started {
		end, err := waitTask(ctx, s, t.ID)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(w, "volume %s: scrub %s: %d of %d segments, %d blocks bad, %d healed, %d left bad, %d parity chunks rewritten%s%s\n",
			end.Volume, end.State, end.Done, end.Total, end.Found, end.Healed, end.Unhealed, end.Parity, unsettledSuffix(end), errSuffix(end.Error))
		for i := range res {
			if res[i].Task == end.ID {
				res[i].State, res[i].Done, res[i].Total, res[i].Found, res[i].Healed, res[i].Error = end.State, end.Done, end.Total, end.Found, end.Healed, end.Error
				res[i].Parity, res[i].Unhealed = end.Parity, end.Unhealed
			}
		}
		if end.State != meta.TaskDone && failed == nil {
			failed = fmt.Errorf("scrub of volume %s %s: %s", end.Volume, end.State, end.Error)
		}
	}
	return res, failed
}

// waitTask polls task id until it is no longer running, or its holder no
// longer owns the volume (the scrub then waits for the holder to map it
// again: a *WaitError, ErrWaitBlocked), or ctx's deadline comes (a
// *WaitError, ErrWaitTimedOut).
func waitTask(ctx context.Context, s *meta.Store, id string) (*meta.TaskRecord, error) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := ""
	// timedOut is the answer once ctx's deadline has come, also when it
	// came in the middle of a poll (a read cut short is the deadline, not
	// an etcd fault).
	timedOut := func(err error) error {
		if last != "" && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &WaitError{Why: ErrWaitTimedOut, Last: last}
		}
		return err
	}
	for {
		t, err := s.Task(ctx, id)
		if err != nil {
			return nil, timedOut(err)
		}
		if t.State != meta.TaskRunning {
			return t, nil
		}
		last = fmt.Sprintf("scrub of volume %s: %d of %d segments", t.Volume, t.Done, t.Total)
		mapper, err := s.Mapper(ctx, t.Volume)
		if err != nil {
			return nil, timedOut(err)
		}
		if mapper != t.Holder {
			return nil, &WaitError{Why: ErrWaitBlocked, Last: last, Blocked: []string{
				fmt.Sprintf("volume %s: %s no longer maps it; the scrub resumes at segment %d of %d when it maps it again", t.Volume, t.Holder, t.Done, t.Total)}}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil, ctx.Err()
			}
			return nil, timedOut(ctx.Err())
		case <-tick.C:
		}
	}
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return ": " + e
}

// unsettledSuffix names the unsettled blocks scrub t passed over, and
// what settles them ("" for none).
func unsettledSuffix(t *meta.TaskRecord) string {
	if t.Unsettled == 0 {
		return ""
	}
	return fmt.Sprintf(", %d blocks unsettled (read as corrupt until `nvstripe volume settle %s`)", t.Unsettled, t.Volume)
}
