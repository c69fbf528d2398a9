package scale

import (
	"runtime/metrics"
	"testing"
	"time"
)

// TestSchedLatencyPercentile: the percentile of the difference of two
// histograms is the upper bound of the bucket that holds it, and ignores
// what was counted before.
func TestSchedLatencyPercentile(t *testing.T) {
	buckets := []float64{0, 0.001, 0.01, 0.1, 1, 10}
	before := schedLatency{&metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{0, 0, 0, 0, 50}}}
	now := schedLatency{&metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{90, 9, 1, 0, 50}}}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, time.Millisecond}, {95, 10 * time.Millisecond}, {100, 100 * time.Millisecond}} {
		if got := now.since(before, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := now.since(now, 99); got != 0 {
		t.Errorf("no waits between two equal reads: p99 %v, want 0", got)
	}
	if got := readSched().since(schedLatency{}, 99); got < 0 {
		t.Errorf("this process's p99 %v", got)
	}
}
