package scale

import (
	"math"
	"runtime/metrics"
	"time"
)

// schedLatency reads the harness's Go scheduler latency histogram: how
// long runnable goroutines waited for a CPU. The harness runs every
// simulated node's lease renewals, so a p99 in seconds here means a lapsed
// lease was the harness starved of CPU (another load on the machine),
// not etcd answering late.
type schedLatency struct{ h *metrics.Float64Histogram }

const schedMetric = "/sched/latencies:seconds"

func readSched() schedLatency {
	s := []metrics.Sample{{Name: schedMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return schedLatency{}
	}
	return schedLatency{s[0].Value.Float64Histogram()}
}

// since returns the p-th percentile (0..100) of the waits between before
// and now, as the upper bound of the bucket holding it; 0 when there were
// none or the runtime does not export the metric.
func (now schedLatency) since(before schedLatency, p float64) time.Duration {
	if now.h == nil {
		return 0
	}
	counts := make([]uint64, len(now.h.Counts))
	var total uint64
	for i, c := range now.h.Counts {
		if before.h != nil && i < len(before.h.Counts) {
			c -= before.h.Counts[i]
		}
		counts[i] = c
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(float64(total) * p / 100))
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= rank {
			up := now.h.Buckets[i+1]
			if math.IsInf(up, 1) {
				up = now.h.Buckets[i]
			}
			return time.Duration(up * float64(time.Second))
		}
	}
	return 0
}
