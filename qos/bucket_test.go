package qos

import (
	"container/heap"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// TestBucketExact: a bucket of 10 tokens a second holding 5, on given
// times: the burst goes at once, each later token waits its tenth of a
// second, a pause refills only up to the capacity, tokens given back let
// the next request go sooner, and a rate change applies to a request
// already waiting.
func TestBucketExact(t *testing.T) {
	b := newBucket(10, 5, t0)
	for i := 1; i <= 5; i++ {
		if got := b.readyAt(t0, b.take(t0, 1)); got.After(t0) {
			t.Fatalf("token %d of the burst waits until %v", i, got.Sub(t0))
		}
	}
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond} {
		if got := b.readyAt(t0, b.take(t0, 1)); !got.Equal(at(want)) {
			t.Fatalf("token %d past the burst: ready at %v, want %v", 6+i, got.Sub(t0), want)
		}
	}
	// 8 taken; at 10s the bucket is full again: 8+5 filled, no more.
	if got := b.filled(at(10 * time.Second)); got != 13 {
		t.Fatalf("after a pause: %v filled, want 13", got)
	}
	for range 5 {
		b.take(at(10*time.Second), 1)
	}
	mark := b.take(at(10*time.Second), 3) // 3 past the burst: 300ms
	if got := b.readyAt(at(10*time.Second), mark); !got.Equal(at(10*time.Second + 300*time.Millisecond)) {
		t.Fatalf("a request of 3 past the burst: ready at %v", got.Sub(t0))
	}
	now := at(10*time.Second + 100*time.Millisecond)
	b.giveBack(now, 1) // one token back: 100ms sooner
	if got := b.readyAt(now, mark); !got.Equal(at(10*time.Second + 200*time.Millisecond)) {
		t.Fatalf("after a token given back: ready at %v, want 10.2s", got.Sub(t0))
	}
	b.set(now, 5, 5) // the one token still owed fills at 5/s
	if got := b.readyAt(now, mark); !got.Equal(at(10*time.Second + 300*time.Millisecond)) {
		t.Fatalf("after halving the rate: ready at %v, want 10.3s", got.Sub(t0))
	}
	now = at(10*time.Second + 150*time.Millisecond) // 0.25 filled since: 0.75 owed, at 50/s
	b.set(now, 50, 5)
	if got := b.readyAt(now, mark); !got.Equal(at(10*time.Second + 165*time.Millisecond)) {
		t.Fatalf("after raising the rate: ready at %v, want 10.165s", got.Sub(t0))
	}
}

// TestBucketRateExact: 32 requests kept in flight against 2000 a second
// with a burst of 2000, each asking again the moment it goes: exactly
// 2000 (the burst) + 5*2000 go within the first 5 seconds, whatever the
// queue depth, and the 12000th goes at exactly 5s.
func TestBucketRateExact(t *testing.T) {
	for _, qd := range []int{1, 32, 256} {
		b := newBucket(2000, 2000, t0)
		q := &starts{}
		for range qd {
			heap.Push(q, b.readyAt(t0, b.take(t0, 1)))
		}
		n, last := 0, t0
		for {
			s := heap.Pop(q).(time.Time)
			if s.After(at(5 * time.Second)) {
				break
			}
			if s.Before(last) {
				t.Fatalf("qd %d: request %d goes at %v, before one that asked earlier (%v)", qd, n+1, s.Sub(t0), last.Sub(t0))
			}
			n, last = n+1, s
			heap.Push(q, b.readyAt(s, b.take(s, 1)))
		}
		if n != 12000 || !last.Equal(at(5*time.Second)) {
			t.Fatalf("qd %d: %d requests went in 5s, the last at %v; want 12000, the last at 5s", qd, n, last.Sub(t0))
		}
	}
}

// starts is a min-heap of start times.
type starts []time.Time

func (s starts) Len() int           { return len(s) }
func (s starts) Less(i, j int) bool { return s[i].Before(s[j]) }
func (s starts) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s *starts) Push(x any)        { *s = append(*s, x.(time.Time)) }
func (s *starts) Pop() any {
	old := *s
	x := old[len(old)-1]
	*s = old[:len(old)-1]
	return x
}
