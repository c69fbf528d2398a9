package qos

import (
	"math"
	"time"
)

// bucket is one token bucket (package doc). The tokens filled at time t
// are base + rate*(t - baseAt), capped at taken + capacity; base and baseAt
// move only when the cap is reached, a request gives tokens back or the
// rate changes, so that the time a request may go is worked out from one
// product, not from a sum of many small fills. Its methods take the time
// as an argument: the arithmetic is pure. REQUIRES: the Limiter's mutex
// held.
type bucket struct {
	rate     float64 // tokens a second, > 0
	capacity float64 // the most tokens it holds, > 0
	base     float64 // tokens filled at baseAt
	baseAt   time.Time
	taken    float64 // tokens handed out
	retired  bool    // its limit was removed: nobody waits on it any more
}

// newBucket returns a full bucket at now.
func newBucket(rate, capacity float64, now time.Time) *bucket {
	return &bucket{rate: rate, capacity: capacity, base: capacity, baseAt: now}
}

// filled is the tokens filled at now (not before baseAt).
func (b *bucket) filled(now time.Time) float64 {
	return min(b.base+b.rate*now.Sub(b.baseAt).Seconds(), b.taken+b.capacity)
}

// advance restarts the fill at now when the bucket is full: a full bucket
// stops filling.
func (b *bucket) advance(now time.Time) {
	if f := b.filled(now); f >= b.taken+b.capacity {
		b.base, b.baseAt = f, now
	}
}

// take hands out n tokens at now and returns the mark the request may go
// at: when the tokens filled reach it.
func (b *bucket) take(now time.Time, n float64) float64 {
	b.advance(now)
	b.taken += n
	return b.taken
}

// readyAt is when the tokens filled reach mark at the current rate: now
// when they have.
func (b *bucket) readyAt(now time.Time, mark float64) time.Time {
	if b.filled(now) >= mark {
		return now
	}
	// Rounded up: a request never goes before its tokens are there.
	return b.baseAt.Add(time.Duration(math.Ceil((mark - b.base) / b.rate * float64(time.Second))))
}

// giveBack returns n tokens at now (a request that will not run).
func (b *bucket) giveBack(now time.Time, n float64) {
	b.base, b.baseAt = b.filled(now)+n, now
	b.advance(now)
}

// set changes the rate and capacity at now: what filled until now filled at
// the old rate.
func (b *bucket) set(now time.Time, rate, capacity float64) {
	b.base, b.baseAt = b.filled(now), now
	b.rate, b.capacity = rate, capacity
	b.base = min(b.base, b.taken+capacity)
}
