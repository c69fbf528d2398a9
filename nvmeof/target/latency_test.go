package target

import (
	"fmt"
	"testing"
	"time"
)

// TestLatencyBuckets checks that a latency lands in the first bucket
// whose bound holds it, and one beyond every bound in the last.
func TestLatencyBuckets(t *testing.T) {
	bounds := LatencyBounds()
	for _, d := range []time.Duration{0, time.Microsecond, 16 * time.Microsecond, 17 * time.Microsecond,
		32 * time.Microsecond, 33 * time.Microsecond, time.Millisecond, bounds[len(bounds)-1], bounds[len(bounds)-1] + time.Microsecond, time.Hour} {
		t.Run(fmt.Sprint(d), func(t *testing.T) {
			var h latHist
			h.observe(d)
			s := h.snapshot()
			want := len(bounds)
			for i, b := range bounds {
				if d.Truncate(time.Microsecond) <= b {
					want = i
					break
				}
			}
			if s.Counts[want] != 1 || s.Count() != 1 || s.Sum != d {
				t.Fatalf("%v: counts %v sum %v, want one in bucket %d", d, s.Counts, s.Sum, want)
			}
		})
	}
}
