package logging

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

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
