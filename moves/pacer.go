package moves

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/controller/decide"
)

// PacerConfig tunes a Pacer. Zero fields take their defaults.
type PacerConfig struct {
	// Bandwidth is the most bytes per second data movement may use while
	// foreground IO is unhurt. Default 256 MiB/s. Negative: unlimited (no
	// pacing at all, foreground latency included).
	Bandwidth int64
	// Burst is the most bytes that may go at once after a quiet spell.
	// Default Bandwidth/10, at least 1 MiB.
	Burst int64
	// Baseline is the foreground latency movement should not add to.
	// Default 0: learned, the lowest smoothed latency observed.
	Baseline time.Duration
	// Tolerance: smoothed latency up to Baseline*(1+Tolerance) leaves
	// movement at full rate; above it the rate falls in proportion
	// (twice the limit: half the rate). Default 0.1: foreground first. The
	// aim is that foreground IO keeps at least 70 % of its throughput during
	// a rebuild; with 0.5 a latency-bound reader could fall to 67 % before
	// movement slowed at all (measured: BenchmarkRebuildUnderReads in
	// volclient, fg-ratio 0.64-0.79 at 0.25, 0.78-0.87 at 0.1).
	Tolerance float64
	// MinFactor: the rate never falls below Bandwidth*MinFactor, so
	// redundancy is always restored eventually. Default 0.05.
	MinFactor float64
	// Smoothing is the weight of a new latency sample in the moving
	// average. Default 0.2.
	Smoothing float64
	// Idle: with no latency sample for this long, foreground IO counts as
	// idle and movement runs at full rate. Default 1s.
	Idle time.Duration
}

// EnsureDefaults fills zero fields with their defaults.
func (c *PacerConfig) EnsureDefaults() {
	if c.Bandwidth == 0 {
		c.Bandwidth = 256 << 20
	}
	if c.Burst == 0 {
		c.Burst = max(c.Bandwidth/10, 1<<20)
	}
	setF := func(f *float64, v float64) {
		if *f == 0 {
			*f = v
		}
	}
	setF(&c.Tolerance, 0.1)
	setF(&c.MinFactor, 0.05)
	setF(&c.Smoothing, 0.2)
	if c.Idle == 0 {
		c.Idle = time.Second
	}
}

// Validate reports values EnsureDefaults cannot mend, each with what to
// give (class decide.ErrInvalid).
func (c *PacerConfig) Validate() error {
	var errs []error
	bad := func(field string, v any, want string) {
		errs = append(errs, fmt.Errorf("%s %v: give %s", field, v, want))
	}
	if c.Burst < 0 {
		bad("Burst", c.Burst, "0 (the default) or more")
	}
	if c.Baseline < 0 {
		bad("Baseline", c.Baseline, "0 (learned, the default) or more")
	}
	if c.Idle < 0 {
		bad("Idle", c.Idle, "0 (the default, 1s) or more")
	}
	if !(c.Tolerance >= 0) {
		bad("Tolerance", c.Tolerance, "0 (the default, 0.1) or more")
	}
	if !(c.MinFactor > 0 && c.MinFactor <= 1) {
		bad("MinFactor", c.MinFactor, "above 0 and at most 1 (0: the default, 0.05)")
	}
	if !(c.Smoothing > 0 && c.Smoothing <= 1) {
		bad("Smoothing", c.Smoothing, "above 0 and at most 1 (0: the default, 0.2)")
	}
	if len(errs) > 0 {
		return fmt.Errorf("pacer config: %w: %w", errors.Join(errs...), decide.ErrInvalid)
	}
	return nil
}

// Throttle is the Pacer's pure core: a token bucket over bytes whose fill
// rate is Bandwidth times a foreground factor in [MinFactor, 1] derived
// from observed foreground latency. Time is always an argument. Not safe
// for concurrent use.
//
// Tokens may go negative: Take lets a request of any size through and
// returns how long its caller must wait for the debt to be repaid, so one
// large copy is paced like many small ones.
type Throttle struct {
	cfg      PacerConfig
	tokens   float64   // bytes available (negative: debt)
	filled   time.Time // time tokens were last refilled
	avg      float64   // smoothed foreground latency, ns (0: none yet)
	sampled  time.Time // time of the last latency sample
	baseline float64   // ns
}

// NewThrottle returns a Throttle with a full bucket at now.
func NewThrottle(cfg PacerConfig, now time.Time) (*Throttle, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Throttle{cfg: cfg, tokens: float64(cfg.Burst), filled: now, baseline: float64(cfg.Baseline)}, nil
}

// Observe records one foreground IO latency measured at now.
func (t *Throttle) Observe(latency time.Duration, now time.Time) {
	t.refill(now) // tokens earned so far at the old rate
	x := float64(max(latency, 1))
	if t.avg == 0 {
		t.avg = x
	} else {
		t.avg += t.cfg.Smoothing * (x - t.avg)
	}
	t.sampled = now
	if t.cfg.Baseline == 0 && (t.baseline == 0 || t.avg < t.baseline) {
		t.baseline = t.avg
	}
}

// Factor returns the foreground factor at now: 1 while foreground latency
// is within tolerance of the baseline or foreground is idle, less as
// latency grows, never below MinFactor.
func (t *Throttle) Factor(now time.Time) float64 {
	if t.avg == 0 || now.Sub(t.sampled) >= t.cfg.Idle {
		return 1
	}
	limit := t.baseline * (1 + t.cfg.Tolerance)
	if t.avg <= limit {
		return 1
	}
	return max(limit/t.avg, t.cfg.MinFactor)
}

// Rate returns the bytes per second movement may use at now (+Inf when
// unlimited).
func (t *Throttle) Rate(now time.Time) float64 {
	if t.cfg.Bandwidth < 0 {
		return math.Inf(1)
	}
	return float64(t.cfg.Bandwidth) * t.Factor(now)
}

func (t *Throttle) refill(now time.Time) {
	if dt := now.Sub(t.filled); dt > 0 && t.cfg.Bandwidth >= 0 {
		t.tokens = min(t.tokens+dt.Seconds()*t.Rate(now), float64(t.cfg.Burst))
	}
	if now.After(t.filled) {
		t.filled = now
	}
}

// Take spends n bytes at now and returns how long the caller must wait
// before moving them (0: at once).
func (t *Throttle) Take(n int64, now time.Time) time.Duration {
	if t.cfg.Bandwidth < 0 || n <= 0 {
		return 0
	}
	t.refill(now)
	t.tokens -= float64(n)
	if t.tokens >= 0 {
		return 0
	}
	return time.Duration(math.Ceil(-t.tokens / t.Rate(now) * 1e9))
}

// Refund gives back n bytes taken but not moved (the caller gave up).
func (t *Throttle) Refund(n int64) {
	if n > 0 {
		t.tokens = min(t.tokens+float64(n), float64(t.cfg.Burst))
	}
}

// Pacer meters data movement: movers call Wait before each copy, and the
// volume's IO path reports foreground latencies through Observe. Safe for
// concurrent use.
type Pacer struct {
	mu sync.Mutex // guards t
	t  *Throttle
}

// NewPacer returns a Pacer with a full bucket.
func NewPacer(cfg PacerConfig) (*Pacer, error) {
	t, err := NewThrottle(cfg, time.Now())
	if err != nil {
		return nil, err
	}
	return &Pacer{t: t}, nil
}

// Observe records one foreground IO latency.
func (p *Pacer) Observe(latency time.Duration) {
	p.mu.Lock()
	p.t.Observe(latency, time.Now())
	p.mu.Unlock()
}

// Factor returns the current foreground factor (for status and metrics).
func (p *Pacer) Factor() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.t.Factor(time.Now())
}

// Wait blocks until n bytes may be moved, or ctx ends (then the bytes are
// refunded and the context's error returned, wrapped).
func (p *Pacer) Wait(ctx context.Context, n int64) error {
	p.mu.Lock()
	d := p.t.Take(n, time.Now())
	p.mu.Unlock()
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		p.t.Refund(n)
		p.mu.Unlock()
		return fmt.Errorf("pacer: wait for %d bytes: %w", n, ctx.Err())
	}
}
