package admin

import (
	"cmp"
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

// ScrubOptions say whether and how Scrub waits for the scrubs it starts.
type ScrubOptions struct {
	// Wait waits for each scrub to end and reports what it found.
	Wait bool
	// OwnerGrace is how long a wait that finds the scrub's owner no longer
	// mapping the volume waits for it to map it again (an agent that
	// restarts unmaps its volumes and maps them again, and the scrub
	// resumes) before it ends as blocked. Default DefaultOwnerGrace.
	OwnerGrace time.Duration
}

// DefaultOwnerGrace is ScrubOptions.OwnerGrace's default: time for an
// agent to restart and map its volumes again.
const DefaultOwnerGrace = 30 * time.Second

// ScrubNamed is `admin scrub [VOLUME...]`: Scrub of the named volumes, or
// ScrubAll when none is named.
func ScrubNamed(ctx context.Context, w io.Writer, s *meta.Store, names []string, o ScrubOptions) ([]ScrubResult, error) {
	if len(names) == 0 {
		return ScrubAll(ctx, w, s, o)
	}
	return Scrub(ctx, w, s, names, true, o)
}

// ScrubAll is Scrub of every volume, those not mapped read-write skipped.
func ScrubAll(ctx context.Context, w io.Writer, s *meta.Store, o ScrubOptions) ([]ScrubResult, error) {
	vols, err := s.Volumes(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(vols))
	for _, v := range vols {
		names = append(names, v.Name)
	}
	return Scrub(ctx, w, s, names, false, o)
}

// Scrub starts the scrub of each volume through etcd (a task its
// read-write owner runs; volumes not mapped read-write are skipped unless
// named, which is an error then) and, with o.Wait, waits for each to end.
// w gets one text line per event (io.Discard: none); the results are
// returned for -o json.
func Scrub(ctx context.Context, w io.Writer, s *meta.Store, names []string, named bool, o ScrubOptions) ([]ScrubResult, error) {
	res := []ScrubResult{}
	var started []*meta.TaskRecord
	grace := cmp.Or(o.OwnerGrace, DefaultOwnerGrace)
	for _, name := range names {
		t, err := s.StartScrub(ctx, name)
		if errors.Is(err, meta.ErrInvalid) && named && o.Wait {
			t, err = startWhenMapped(ctx, w, s, name, grace)
		}
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
	if !o.Wait {
		return res, nil
	}
	var failed error
	for _, t := range started {
		end, err := waitTask(ctx, w, s, t.ID, grace)
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

// startWhenMapped starts the scrub of volume, which nobody maps read-write
// now (StartScrub failed, meta.ErrInvalid), once an owner maps it (an agent
// restarting maps its volumes again), waiting up to grace and saying so on
// w; then it returns StartScrub's error. ctx's deadline is a *WaitError,
// ErrWaitTimedOut.
func startWhenMapped(ctx context.Context, w io.Writer, s *meta.Store, volume string, grace time.Duration) (*meta.TaskRecord, error) {
	fmt.Fprintf(w, "volume %s: nobody maps it read-write now: waiting up to %v for an owner to map it (restarting?)\n", volume, grace)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(grace)
	for {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, &WaitError{Why: ErrWaitTimedOut, Last: fmt.Sprintf("scrub of volume %s: not started: nobody maps it read-write", volume)}
			}
			return nil, ctx.Err()
		case <-tick.C:
		}
		t, err := s.StartScrub(ctx, volume)
		if !errors.Is(err, meta.ErrInvalid) || !time.Now().Before(deadline) {
			return t, err
		}
	}
}

// waitTask polls task id until it is no longer running, or ctx's deadline
// comes (a *WaitError, ErrWaitTimedOut). When the task's holder does not
// map the volume (an agent restarting, or one stopped or killed) it waits
// up to grace for the holder to map it again, saying so on w, and the
// scrub goes on there; after grace the wait is blocked (a *WaitError,
// ErrWaitBlocked, saying who maps the volume and what to do).
func waitTask(ctx context.Context, w io.Writer, s *meta.Store, id string, grace time.Duration) (*meta.TaskRecord, error) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := ""
	var away ownerAway
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
		if blocked := away.see(w, t, mapper, grace); blocked != "" {
			return nil, &WaitError{Why: ErrWaitBlocked, Last: last, Reason: blocked}
		}
		if !away.since.IsZero() {
			last += fmt.Sprintf(", waiting for %s to map the volume again", t.Holder)
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

// ownerAway follows, for a wait, whether the holder of a running scrub
// maps its volume: since when it has not (zero while it does).
type ownerAway struct {
	since time.Time
}

// see takes a poll's task t and the volume's read-write owner now
// (mapper, "" for none) and says on w when the holder stops and starts
// mapping the volume again; it returns why the wait is blocked once the
// holder has not mapped it for grace ("": go on waiting).
func (a *ownerAway) see(w io.Writer, t *meta.TaskRecord, mapper string, grace time.Duration) string {
	now := ownerNow(mapper)
	switch {
	case mapper == t.Holder && !a.since.IsZero():
		a.since = time.Time{}
		fmt.Fprintf(w, "volume %s: %s maps it again: its scrub goes on from segment %d of %d\n", t.Volume, t.Holder, t.Done, t.Total)
	case mapper == t.Holder:
	case a.since.IsZero():
		a.since = time.Now()
		fmt.Fprintf(w, "volume %s: %s, which runs its scrub, does not map it now (%s): waiting up to %v for it to map it again (restarting?)\n",
			t.Volume, t.Holder, now, grace)
	case time.Since(a.since) >= grace:
		why := fmt.Sprintf("volume %s: %s, which runs its scrub, did not map it again within %v (%s): ", t.Volume, t.Holder, grace, now)
		if mapper == "" {
			return why + fmt.Sprintf("the scrub resumes at segment %d of %d when %s maps it again; map it there, or run `nvstripe admin scrub %s` once it is mapped elsewhere",
				t.Done, t.Total, t.Holder, t.Volume)
		}
		return why + fmt.Sprintf("the scrub, stopped at segment %d of %d, runs only at %s; run `nvstripe admin scrub %s` again to scrub it at %s",
			t.Done, t.Total, t.Holder, t.Volume, mapper)
	}
	return ""
}

// ownerNow says who maps a volume read-write, mapper ("" for none).
func ownerNow(mapper string) string {
	if mapper == "" {
		return "nobody maps it read-write"
	}
	return mapper + " maps it now"
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
