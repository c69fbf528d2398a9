package moves

import (
	"log/slog"
	"time"

	"github.com/nvstripe/nvstripe/meta"
)

// Event is a shard move (a rebuild, drain or rebalance move) starting or
// ending, as the controller's runner (controller.RunnerConfig.OnMove) and
// the volume owner's task server (volclient.TaskOptions.OnMove) report it.
type Event struct {
	Task  Task          // Done and Total are bytes of shard data
	Ended bool          // false: it starts
	Took  time.Duration // when ended
	Err   error         // when ended: why it failed (nil: done)
}

// End marks t done, or failed with err's text (err nil: done), and returns
// the event that reports its end after took.
func (t *Task) End(took time.Duration, err error) Event {
	t.State = meta.TaskDone
	if err != nil {
		t.State, t.Err = meta.TaskFailed, err.Error()
	}
	return Event{Task: *t, Ended: true, Took: took, Err: err}
}

// Log returns a move listener that logs one line when a move starts and
// one when it ends (volume, segment, shard, kind, bytes, duration).
func Log(l *slog.Logger) func(Event) {
	return func(e Event) {
		t := e.Task
		attrs := []any{"volume", t.Segment.Volume, "segment", t.Segment.Index, "shard", t.Shard, "kind", t.Kind.String(), "to", t.To}
		switch {
		case !e.Ended:
			l.Info("move started", append(attrs, "from", t.From)...)
		case e.Err != nil:
			l.Warn("move failed", append(attrs, "bytes", t.Done, "duration", e.Took, "err", e.Err)...)
		default:
			l.Info("move ended", append(attrs, "bytes", t.Total, "duration", e.Took)...)
		}
	}
}
