// Package retry is the one home of waiting and backing off: a growing wait
// (Options.Grow, Backoff) for loops that keep their own shape, an iterator
// (Start, Retry.Next) for plain "try, wait, try again" loops, Sleep, a
// wait that ends early with its context, and Every, a periodic loop.
//
// The shape follows CockroachDB's util/retry: Options{Initial, Max,
// Multiplier, MaxRetries} plus an optional jitter. Waits start at Initial,
// grow by Multiplier (default 2) after each one and stop growing at Max.
//
// A Backoff or a Retry is used by one goroutine; Options and Sleep are safe
// anywhere. Tests of loops built on it run in testing/synctest like any
// other timer loop.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Options says how waits grow. The zero value waits 50ms, doubling up to
// 10s, without jitter and without a limit on retries.
type Options struct {
	// Initial is the first wait. Default 50ms.
	Initial time.Duration
	// Max caps every wait. Default 10s (or Initial, if that is larger).
	Max time.Duration
	// Multiplier grows the wait after each one. Default 2; below 1 means 1.
	Multiplier float64
	// MaxRetries ends a Retry after that many waits; 0 means no limit.
	MaxRetries int
	// Jitter spreads each wait of a Backoff or Retry uniformly over
	// [w*(1-Jitter), w*(1+Jitter)] so that many clients do not retry in
	// step; 0 (the default) waits exactly, values are clamped to [0, 1].
	// Grow ignores it.
	Jitter float64
}

// withDefaults fills in the documented defaults.
func (o Options) withDefaults() Options {
	if o.Initial <= 0 {
		o.Initial = 50 * time.Millisecond
	}
	if o.Max <= 0 {
		o.Max = 10 * time.Second
	}
	o.Max = max(o.Max, o.Initial)
	if o.Multiplier == 0 {
		o.Multiplier = 2
	}
	o.Multiplier = max(o.Multiplier, 1)
	o.Jitter = min(max(o.Jitter, 0), 1)
	return o
}

// Grow returns the wait after prev: Initial when prev is not positive (no
// wait yet), else prev times Multiplier, never below Initial nor above Max.
// It is a pure function of its arguments, for state kept per item (a map
// of volumes that wait, say) rather than in a loop.
func (o Options) Grow(prev time.Duration) time.Duration {
	o = o.withDefaults()
	if prev <= 0 {
		return o.Initial
	}
	next := float64(prev) * o.Multiplier
	if next >= float64(o.Max) {
		return o.Max
	}
	return max(time.Duration(next), o.Initial)
}

// Backoff hands out growing waits without sleeping, for loops that wait
// only on some paths. The zero value is not ready: use NewBackoff.
type Backoff struct {
	o    Options
	prev time.Duration
}

// NewBackoff returns a Backoff whose first wait is o.Initial.
func NewBackoff(o Options) *Backoff {
	return &Backoff{o: o.withDefaults()}
}

// Next returns the wait to use now (jittered) and grows the next one.
func (b *Backoff) Next() time.Duration {
	b.prev = b.o.Grow(b.prev)
	return jitter(b.prev, b.o.Jitter)
}

// Reset makes the next wait Initial again (after a success, say).
func (b *Backoff) Reset() { b.prev = 0 }

// jitter spreads d by the fraction f either way.
func jitter(d time.Duration, f float64) time.Duration {
	if f == 0 || d <= 0 {
		return d
	}
	return time.Duration(float64(d) * (1 - f + 2*f*rand.Float64()))
}

// Retry is an attempt loop:
//
//	for r := retry.Start(ctx, o); r.Next(); {
//		if err = try(); err == nil {
//			break
//		}
//	}
//
// The first Next returns at once; each later one waits the next backoff.
type Retry struct {
	ctx      context.Context
	b        Backoff
	max      int
	attempts int
}

// Start begins an attempt loop that ends with ctx.
func Start(ctx context.Context, o Options) *Retry {
	return &Retry{ctx: ctx, b: *NewBackoff(o), max: o.MaxRetries}
}

// Next waits before the next attempt (not before the first) and says
// whether to make it: false once ctx has ended or MaxRetries waits are
// used up.
func (r *Retry) Next() bool {
	if r.ctx.Err() != nil {
		return false
	}
	if r.attempts > 0 {
		if r.max > 0 && r.attempts > r.max {
			return false
		}
		if Sleep(r.ctx, r.b.Next()) != nil {
			return false
		}
	}
	r.attempts++
	return true
}

// Wait is the wait the next call of Next will sleep (before jitter), for
// a log line such as "retrying in 2s".
func (r *Retry) Wait() time.Duration { return r.b.o.Grow(r.b.prev) }

// Attempt is the number of attempts Next has allowed so far.
func (r *Retry) Attempt() int { return r.attempts }

// Reset makes the next wait Initial again and the retry count start over.
func (r *Retry) Reset() {
	r.b.Reset()
	r.attempts = min(r.attempts, 1)
}

// Sleep waits d, or until ctx ends: then it returns context.Cause(ctx). A d
// that is not positive returns nil at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Every calls f every d (the first time d after the call) until ctx ends.
// A call of f that takes longer than d delays the next one; ticks are not
// queued up.
func Every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
