package controller

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// MoveEvent is a shard move (a rebuild, drain or rebalance move) starting
// or ending, as RunnerConfig.OnMove and the volume owner's task server
// (volclient.TaskOptions.OnMove) report it.
type MoveEvent struct {
	Task  MoveTask      // Done and Total are bytes of shard data
	Ended bool          // false: it starts
	Took  time.Duration // when ended
	Err   error         // when ended: why it failed (nil: done)
}

// LogMoves returns a move listener that logs one line when a move starts
// and one when it ends (volume, segment, shard, kind, bytes, duration).
func LogMoves(l *slog.Logger) func(MoveEvent) {
	return func(e MoveEvent) {
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

// WarnEvery returns a function that logs msg at warning level with the
// attributes of its call, at most once per every per key (a volume):
// the calls in between are counted and the count is logged with the next
// warning, as "suppressed".
func WarnEvery(l *slog.Logger, every time.Duration, msg string) func(key string, attrs ...any) {
	return warnEvery(l, every, msg, time.Now)
}

func warnEvery(l *slog.Logger, every time.Duration, msg string, clock func() time.Time) func(key string, attrs ...any) {
	var mu sync.Mutex
	last, skipped := map[string]time.Time{}, map[string]int{}
	return func(key string, attrs ...any) {
		mu.Lock()
		now := clock()
		if t, ok := last[key]; ok && now.Sub(t) < every {
			skipped[key]++
			mu.Unlock()
			return
		}
		n := skipped[key]
		last[key], skipped[key] = now, 0
		mu.Unlock()
		l.Log(context.Background(), slog.LevelWarn, msg, append(attrs, "suppressed", n)...)
	}
}
