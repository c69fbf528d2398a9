package retry

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

func TestGrow(t *testing.T) {
	o := Options{Initial: 5 * time.Millisecond, Max: time.Second}
	for _, c := range []struct{ prev, want time.Duration }{
		{0, 5 * time.Millisecond},
		{-1, 5 * time.Millisecond},
		{time.Millisecond, 5 * time.Millisecond}, // never below Initial
		{5 * time.Millisecond, 10 * time.Millisecond},
		{600 * time.Millisecond, time.Second}, // capped
		{time.Hour, time.Second},
	} {
		if got := o.Grow(c.prev); got != c.want {
			t.Errorf("Grow(%v) = %v, want %v", c.prev, got, c.want)
		}
	}
	if got := (Options{Initial: time.Second, Multiplier: 3}).Grow(time.Second); got != 3*time.Second {
		t.Errorf("Multiplier 3: Grow(1s) = %v, want 3s", got)
	}
	if got := (Options{}).Grow(0); got != 50*time.Millisecond {
		t.Errorf("zero Options: first wait %v, want the 50ms default", got)
	}
	if got := (Options{Initial: time.Minute}).Grow(time.Minute); got != time.Minute {
		t.Errorf("Initial above the default Max: Grow = %v, want Max raised to Initial", got)
	}
}

func TestBackoffSequenceAndReset(t *testing.T) {
	b := NewBackoff(Options{Initial: time.Millisecond, Max: 4 * time.Millisecond})
	want := []time.Duration{1, 2, 4, 4}
	for i, w := range want {
		if got := b.Next(); got != w*time.Millisecond {
			t.Fatalf("wait %d = %v, want %v", i, got, w*time.Millisecond)
		}
	}
	b.Reset()
	if got := b.Next(); got != time.Millisecond {
		t.Fatalf("after Reset: %v, want 1ms", got)
	}
}

func TestJitterStaysInBounds(t *testing.T) {
	b := NewBackoff(Options{Initial: time.Second, Max: time.Second, Jitter: 0.25})
	seen := map[time.Duration]bool{}
	for range 200 {
		d := b.Next()
		if d < 750*time.Millisecond || d > 1250*time.Millisecond {
			t.Fatalf("jittered wait %v outside [750ms, 1250ms]", d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Fatalf("200 jittered waits took %d values: no jitter", len(seen))
	}
}

// TestRetryWaitsAndStops: the first attempt is at once, later ones after
// growing waits; MaxRetries bounds the waits.
func TestRetryWaitsAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var at []time.Duration
		for r := Start(t.Context(), Options{Initial: time.Second, Max: 3 * time.Second, MaxRetries: 4}); r.Next(); {
			at = append(at, time.Since(start))
		}
		want := []time.Duration{0, 1, 3, 6, 9}
		if len(at) != len(want) {
			t.Fatalf("attempts at %v, want %d attempts", at, len(want))
		}
		for i, w := range want {
			if at[i] != w*time.Second {
				t.Fatalf("attempt %d at %v, want %v (all: %v)", i, at[i], w*time.Second, at)
			}
		}
	})
}

// TestRetryEndsWithContext: a cancelled context ends the wait at once and
// Next says stop.
func TestRetryEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		r := Start(ctx, Options{Initial: time.Hour})
		if !r.Next() {
			t.Fatal("first attempt refused")
		}
		go func() {
			time.Sleep(time.Minute)
			cancel()
		}()
		start := time.Now()
		if r.Next() {
			t.Fatal("Next allowed an attempt after its context ended")
		}
		if d := time.Since(start); d != time.Minute {
			t.Fatalf("Next returned after %v, want when the context ended (1m)", d)
		}
		if r.Attempt() != 1 {
			t.Fatalf("Attempt() = %d, want 1", r.Attempt())
		}
	})
}

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if err := Sleep(t.Context(), time.Second); err != nil {
			t.Fatalf("Sleep: %v", err)
		}
		why := errors.New("shut down")
		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(why)
		if err := Sleep(ctx, time.Hour); !errors.Is(err, why) {
			t.Fatalf("Sleep on an ended context: %v, want its cause", err)
		}
		if err := Sleep(ctx, 0); err != nil {
			t.Fatalf("Sleep(0): %v, want nil (no wait, nothing to end)", err)
		}
	})
}

func TestEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		var at []time.Duration
		returned := make(chan struct{})
		go func() {
			Every(ctx, time.Second, func() {
				at = append(at, time.Since(start))
				if len(at) == 3 {
					cancel()
				}
			})
			close(returned)
		}()
		<-returned
		want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
		if !slices.Equal(at, want) {
			t.Fatalf("f called at %v, want %v (every second, none at the start, none after the context ended)", at, want)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("Every returned %v after the start, want when the context ended (3s)", d)
		}
	})
}
