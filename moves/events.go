package moves

import (
	"log/slog"
	"time"
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
