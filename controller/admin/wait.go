package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/placement"
)

// Progress is one overall progress report of a long operation (a rebalance
// task, a drain): bytes of shard data done of total, the rate since the
// wait began and the time left at that rate.
type Progress struct {
	Done       int64   `json:"done_bytes"`
	Total      int64   `json:"total_bytes"`
	Rate       float64 `json:"rate_bytes_per_second"`
	ETASeconds float64 `json:"eta_seconds"`
	Finished   bool    `json:"finished"`
	Elapsed    float64 `json:"elapsed_seconds"`
}

// String is the progress line people read.
func (p Progress) String() string {
	pct := int64(100)
	if p.Total > 0 {
		pct = p.Done * 100 / p.Total
	}
	s := fmt.Sprintf("%s of %s (%d%%), %s/s", units.FormatSize(p.Done), units.FormatSize(p.Total), pct, units.FormatSize(int64(p.Rate)))
	if p.Finished {
		return s + ", finished in " + (time.Duration(p.Elapsed) * time.Second).String()
	}
	if p.ETASeconds > 0 {
		s += ", ETA " + (time.Duration(p.ETASeconds) * time.Second).String()
	}
	return s
}

// Measure reads from a status how far an operation is: bytes done of
// total, and whether it is finished.
type Measure func(*StatusReply) (done, total int64, finished bool)

// Why a wait ended before its operation finished, tested with errors.Is on
// a *WaitError: the deadline came first, or the controller reports shards
// it has nowhere to move and no move is in flight.
var (
	ErrWaitTimedOut = errors.New("timed out")
	ErrWaitBlocked  = errors.New("blocked")
)

// WaitError is a wait that ended unfinished: why (ErrWaitTimedOut or
// ErrWaitBlocked), how far it got, and what the controller reports
// blocked, or what the wait itself found blocking it.
type WaitError struct {
	Why     error
	Last    string // the last progress, for people
	Blocked []string
	Reason  string // what the wait found blocking it, for people ("": only Blocked)
}

func (e *WaitError) Error() string {
	s := fmt.Sprintf("not finished (%s): %s", e.Why, e.Last)
	if e.Reason != "" {
		s += "; " + e.Reason
	}
	if len(e.Blocked) > 0 {
		s += "; the controller reports blocked: " + strings.Join(e.Blocked, "; ")
	}
	return s
}

func (e *WaitError) Unwrap() error { return e.Why }

// WaitProgress calls fn with the operation's progress every interval until
// it finishes (the last call has Finished set; nil), or ctx ends
// (ErrWaitTimedOut), or the controller reports shards blocked with no move
// in flight and no progress on two statuses in a row (ErrWaitBlocked), both
// as a *WaitError saying how far it got and what is blocked.
func WaitProgress(ctx context.Context, ops Ops, interval time.Duration, measure Measure, fn func(Progress) error) error {
	start := time.Now()
	var first int64 = -1
	var last Progress
	var blockedNow []string
	stuck := 0 // statuses in a row blocked without progress
	err := Watch(ctx, ops, interval, func(st *StatusReply) error {
		done, total, finished := measure(st)
		if first < 0 {
			first = done
		}
		el := time.Since(start).Seconds()
		p := Progress{Done: done, Total: total, Finished: finished, Elapsed: el}
		if el > 0 {
			p.Rate = float64(done-first) / el
		}
		if p.Rate > 0 && total > done {
			p.ETASeconds = float64(total-done) / p.Rate
		}
		if len(st.Blocked) > 0 && len(st.Tasks) == 0 && (stuck == 0 || done == last.Done) {
			stuck++
		} else {
			stuck = 0
		}
		last, blockedNow = p, st.Blocked
		if err := fn(p); err != nil || finished {
			if err == nil {
				err = errFinished
			}
			return err
		}
		if stuck >= 2 {
			return &WaitError{Why: ErrWaitBlocked, Last: p.String(), Blocked: blockedNow}
		}
		return nil
	})
	switch {
	case err == errFinished:
		return nil
	case err == nil && errors.Is(ctx.Err(), context.Canceled):
		return ctx.Err() // interrupted
	case err == nil: // the deadline came
		return &WaitError{Why: ErrWaitTimedOut, Last: last.String(), Blocked: blockedNow}
	}
	return err
}

// errFinished ends Watch from inside WaitProgress.
var errFinished = errors.New("finished")

// TaskMeasure measures a task (a rebalance) by ID: its Done of Total
// while it is listed, finished once the controller removed it.
func TaskMeasure(id string) Measure {
	var last *TaskStatus
	return func(st *StatusReply) (int64, int64, bool) {
		for _, t := range st.Tasks {
			if t.Id == id {
				last = t
				return t.Done, t.Total, false
			}
		}
		if last == nil {
			return 0, 0, true
		}
		return last.Total, last.Total, true
	}
}

// DrainMeasure measures the drain of namespaces: the bytes they used when
// the wait began less those they use now; finished once they use none and
// none is still draining (the controller marks an empty one drained).
func DrainMeasure(namespaces []string) Measure {
	total := int64(-1)
	return func(st *StatusReply) (int64, int64, bool) {
		var used int64
		draining := false
		for _, n := range st.Namespaces {
			for _, id := range namespaces {
				if n.Id == id {
					used += n.Used
					draining = draining || n.State == placement.StateDraining.String()
				}
			}
		}
		if total < 0 {
			total = used
		}
		return max(total-used, 0), total, used == 0 && !draining
	}
}
