package qos

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultBurst is the burst of Limits whose Burst is 0: one second of each
// limit.
const DefaultBurst = time.Second

// Limits are what a Limiter lets through. A zero limit is no limit.
type Limits struct {
	IOPS, ReadIOPS, WriteIOPS int64 // requests a second
	BPS, ReadBPS, WriteBPS    int64 // bytes a second
	// Burst is how much of each limit may be used at once after a pause:
	// each bucket holds Burst of its limit (at least one request or byte).
	// 0 means DefaultBurst.
	Burst time.Duration
}

// Dir is the direction of a request.
type Dir int

// The directions.
const (
	Read Dir = iota
	Write
)

// The buckets of a Limiter, by index.
const (
	bIOPS = iota
	bReadIOPS
	bWriteIOPS
	bBPS
	bReadBPS
	bWriteBPS
	numBuckets
)

// rates returns the limits by bucket index.
func (l Limits) rates() [numBuckets]int64 {
	return [numBuckets]int64{l.IOPS, l.ReadIOPS, l.WriteIOPS, l.BPS, l.ReadBPS, l.WriteBPS}
}

// Limited reports whether l limits anything.
func (l Limits) Limited() bool { return l.rates() != [numBuckets]int64{} }

func (l Limits) burst() time.Duration {
	if l.Burst <= 0 {
		return DefaultBurst
	}
	return l.Burst
}

// Limiter makes requests wait for their turn under Limits (package doc).
// It is safe for concurrent use.
type Limiter struct {
	limited atomic.Bool
	mu      sync.Mutex
	limits  Limits
	buckets [numBuckets]*bucket // nil: no limit
	changed chan struct{}       // closed and replaced when the limits change
}

// NewLimiter returns a Limiter of lim, its buckets full.
func NewLimiter(lim Limits) *Limiter {
	l := &Limiter{changed: make(chan struct{})}
	l.Set(lim)
	return l
}

// Limits returns the limits in force.
func (l *Limiter) Limits() Limits {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limits
}

// Limited reports whether the limiter limits anything now.
func (l *Limiter) Limited() bool { return l.limited.Load() }

// Set makes lim the limits from now on, also for the requests waiting
// now: a new limit starts with a full bucket, a removed one lets its
// waiters go, a changed one keeps what its bucket holds or owes.
func (l *Limiter) Set(lim Limits) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	burst := lim.burst().Seconds()
	for i, r := range lim.rates() {
		b, rate := l.buckets[i], float64(r)
		capacity := max(rate*burst, 1)
		switch {
		case r <= 0 && b != nil:
			b.retired, l.buckets[i] = true, nil
		case r <= 0:
		case b == nil:
			l.buckets[i] = newBucket(rate, capacity, now)
		default:
			b.set(now, rate, capacity)
		}
	}
	l.limits = lim
	l.limited.Store(lim.Limited())
	close(l.changed)
	l.changed = make(chan struct{})
}

// Wait waits until a request of direction dir moving n bytes may go, and
// returns how long it waited (0: it went at once). When ctx ends first it
// gives the request's tokens back and returns ctx's error.
func (l *Limiter) Wait(ctx context.Context, dir Dir, n int64) (time.Duration, error) {
	if !l.limited.Load() {
		return 0, nil
	}
	start := time.Now()
	l.mu.Lock()
	r := l.takeLocked(start, dir, n)
	until, changed := r.readyAt(start), l.changed
	l.mu.Unlock()
	now := start
	for until.After(now) {
		t := time.NewTimer(until.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			l.giveBack(&r)
			return time.Since(start), fmt.Errorf("waiting for the volume's QoS limits: %w", context.Cause(ctx))
		case <-t.C:
		case <-changed:
			t.Stop()
		}
		now = time.Now()
		l.mu.Lock()
		until, changed = r.readyAt(now), l.changed
		l.mu.Unlock()
	}
	return now.Sub(start), nil
}

// reservation is what one request took: at most one request and one byte
// bucket of each of the total and its direction.
type reservation struct {
	n     int
	takes [4]struct {
		b       *bucket
		mark, n float64
	}
}

// takeLocked takes the request's tokens from every bucket that applies.
// REQUIRES: l.mu held.
func (l *Limiter) takeLocked(now time.Time, dir Dir, n int64) reservation {
	var r reservation
	ops, bytes := [2]int{bIOPS, bReadIOPS + int(dir)}, [2]int{bBPS, bReadBPS + int(dir)}
	for _, i := range ops {
		r.add(l.buckets[i], now, 1)
	}
	if n > 0 {
		for _, i := range bytes {
			r.add(l.buckets[i], now, float64(n))
		}
	}
	return r
}

func (r *reservation) add(b *bucket, now time.Time, n float64) {
	if b == nil {
		return
	}
	t := &r.takes[r.n]
	t.b, t.n, t.mark = b, n, b.take(now, n)
	r.n++
}

// readyAt is when the request may go: when the last of its buckets has
// filled to its mark (buckets whose limit was removed no longer count).
// REQUIRES: the Limiter's mutex held.
func (r *reservation) readyAt(now time.Time) time.Time {
	until := now
	for _, t := range r.takes[:r.n] {
		if t.b.retired {
			continue
		}
		if at := t.b.readyAt(now, t.mark); at.After(until) {
			until = at
		}
	}
	return until
}

// giveBack returns the tokens of a request that will not run.
func (l *Limiter) giveBack(r *reservation) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range r.takes[:r.n] {
		if !t.b.retired {
			t.b.giveBack(now, t.n)
		}
	}
}
