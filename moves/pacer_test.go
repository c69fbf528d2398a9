package moves

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nvstripe/nvstripe/controller/decide"
)

func at(d time.Duration) time.Time { return t0.Add(d) }

func newThrottle(t *testing.T, cfg PacerConfig) *Throttle {
	t.Helper()
	th, err := NewThrottle(cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

func TestThrottleBucket(t *testing.T) {
	th := newThrottle(t, PacerConfig{Bandwidth: 100, Burst: 50})
	steps := []struct {
		at   time.Duration
		n    int64
		wait time.Duration
	}{
		{0, 50, 0},            // the full bucket
		{0, 100, time.Second}, // 100 bytes of debt at 100 B/s
		{time.Second, 50, 500 * time.Millisecond}, // debt repaid, 50 more
		{10 * time.Second, 50, 0},                 // refilled, capped at the burst
		{10 * time.Second, 1, 10 * time.Millisecond},
		{10 * time.Second, 0, 0}, // nothing asked, nothing waited
	}
	for i, s := range steps {
		if got := th.Take(s.n, at(s.at)); got != s.wait {
			t.Errorf("step %d: Take(%d) at %v = %v, want %v", i, s.n, s.at, got, s.wait)
		}
	}
	th.Refund(1000)
	if got := th.Take(50, at(10*time.Second)); got != 0 {
		t.Errorf("after refund: wait %v, want 0 (refund capped at the burst)", got)
	}
}

func TestThrottleFactor(t *testing.T) {
	cfg := PacerConfig{Bandwidth: 1000, Burst: 1, Baseline: 10 * time.Millisecond, Tolerance: 0.5, Smoothing: 1, Idle: time.Second}
	cases := []struct {
		latency time.Duration
		at      time.Duration
		factor  float64
	}{
		{0, 0, 1}, // no sample yet
		{10 * time.Millisecond, 0, 1},
		{15 * time.Millisecond, 0, 1},    // within tolerance (0.5)
		{30 * time.Millisecond, 0, 0.5},  // twice the limit of 15ms
		{60 * time.Millisecond, 0, 0.25}, // four times
		{time.Second, 0, 0.05},           // floor
		{time.Second, time.Second, 1},    // no sample for Idle: foreground idle
		{time.Second, 999 * time.Millisecond, 0.05},
	}
	for _, c := range cases {
		th := newThrottle(t, cfg)
		if c.latency > 0 {
			th.Observe(c.latency, t0)
		}
		if got := th.Factor(at(c.at)); math.Abs(got-c.factor) > 1e-9 {
			t.Errorf("latency %v, %v later: factor %v, want %v", c.latency, c.at, got, c.factor)
		}
		if got, want := th.Rate(at(c.at)), 1000*c.factor; math.Abs(got-want) > 1e-6 {
			t.Errorf("latency %v: rate %v, want %v", c.latency, got, want)
		}
	}
}

func TestThrottleLearnsBaseline(t *testing.T) {
	th := newThrottle(t, PacerConfig{Bandwidth: 1000, Burst: 1, Tolerance: 0.5, Smoothing: 0.5, Idle: time.Hour})
	th.Observe(4*time.Millisecond, t0)  // avg 4ms: baseline 4ms
	th.Observe(20*time.Millisecond, t0) // avg 12ms, limit 6ms
	if got := th.Factor(t0); math.Abs(got-0.5) > 1e-9 {
		t.Errorf("factor %v, want 0.5", got)
	}
	th.Observe(2*time.Millisecond, t0) // avg 7ms: baseline stays 4ms
	if got, want := th.Factor(t0), 6.0/7; math.Abs(got-want) > 1e-9 {
		t.Errorf("factor %v, want %v", got, want)
	}
}

// TestThrottleSlowsDebt: a slower rate makes the same debt take longer.
func TestThrottleSlowsDebt(t *testing.T) {
	th := newThrottle(t, PacerConfig{Bandwidth: 100, Burst: 1, Baseline: time.Millisecond, Tolerance: 1, Smoothing: 1, Idle: time.Hour})
	th.Observe(8*time.Millisecond, t0) // factor 2/8: 25 B/s
	if got := th.Take(26, t0); got != time.Second {
		t.Errorf("wait %v, want 1s (25 bytes of debt at 25 B/s)", got)
	}
}

func TestThrottleUnlimited(t *testing.T) {
	th := newThrottle(t, PacerConfig{Bandwidth: -1})
	th.Observe(time.Hour, t0)
	if got := th.Take(1<<40, t0); got != 0 {
		t.Errorf("unlimited: wait %v", got)
	}
}

func TestPacerConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  PacerConfig
		want string // what the error says
	}{
		{PacerConfig{Burst: -1}, "Burst -1: give 0 (the default) or more"},
		{PacerConfig{MinFactor: 2}, "MinFactor 2: give above 0 and at most 1"},
		{PacerConfig{Smoothing: -1}, "Smoothing -1: give above 0 and at most 1"},
		{PacerConfig{Tolerance: -1}, "Tolerance -1: give 0"},
		{PacerConfig{Baseline: -1}, "Baseline -1ns: give 0"},
		{PacerConfig{Idle: -time.Second}, "Idle -1s: give 0 (the default, 1s) or more"},
		{PacerConfig{Tolerance: math.NaN()}, "Tolerance NaN: give 0"},
	} {
		if _, err := NewPacer(c.cfg); !errors.Is(err, decide.ErrInvalid) || !strings.Contains(fmt.Sprint(err), c.want) {
			t.Errorf("%+v: %v, want ErrInvalid saying %q", c.cfg, err, c.want)
		}
	}
	var c PacerConfig
	c.EnsureDefaults()
	if c.Bandwidth != 256<<20 || c.Burst != c.Bandwidth/10 || c.Tolerance != 0.1 || c.MinFactor != 0.05 || c.Idle != time.Second {
		t.Errorf("defaults %+v", c)
	}
}

// waited returns how long n Waits of 1 MiB took on p.
func waited(t *testing.T, ctx context.Context, p *Pacer, n int) time.Duration {
	t.Helper()
	start := time.Now()
	for range n {
		if err := p.Wait(ctx, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	return time.Since(start)
}

// The Wait loop runs in a synctest bubble: its clock is fake and advances
// only when every goroutine is blocked, so the durations below are exact.

func TestPacerWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := NewPacer(PacerConfig{Bandwidth: 1 << 20, Burst: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if got := waited(t, t.Context(), p, 11); got != 10*time.Second {
			t.Errorf("11 MiB at 1 MiB/s with a 1 MiB burst took %v, want 10s", got)
		}
	})
}

func TestPacerForegroundFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := NewPacer(PacerConfig{Bandwidth: 1 << 20, Burst: 1 << 20, Baseline: time.Millisecond, Tolerance: 1, Smoothing: 1})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer synctest.Wait() // the observer has returned
		defer cancel()
		go func() { // foreground IO at 8ms, four times the 2ms limit
			for {
				p.Observe(8 * time.Millisecond)
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
		synctest.Wait()
		if f := p.Factor(); f != 0.25 {
			t.Fatalf("factor %v, want 0.25", f)
		}
		if got := waited(t, ctx, p, 3); got != 8*time.Second {
			t.Errorf("3 MiB at a quarter of 1 MiB/s after a 1 MiB burst took %v, want 8s", got)
		}
	})
}

func TestPacerWaitCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := NewPacer(PacerConfig{Bandwidth: 1 << 20, Burst: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := p.Wait(ctx, 10<<20); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait = %v, want deadline exceeded", err)
		}
		start := time.Now()
		if err := p.Wait(t.Context(), 1<<20); err != nil || time.Since(start) != 0 {
			t.Errorf("after a refund the next MiB should go at once: %v after %v", err, time.Since(start))
		}
	})
}
