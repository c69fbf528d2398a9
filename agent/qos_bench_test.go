package agent

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nvstripe/nvstripe/qos"
)

// BenchmarkServedQoS is the per-call cost of what QoS and per-volume
// telemetry add to a mapping's served device, on 4 KiB reads from memory:
// "classic" is the served device with a latency histogram of classic
// buckets only (as before), "native" with the native buckets as well (as
// now), "native+qos" that behind an unlimited QoS limiter (a mapping of a
// volume without limits), "native+qos-limited" behind limits it never
// reaches. Run with -count to interleave them.
func BenchmarkServedQoS(b *testing.B) {
	mem := benchMem(b)
	classic := NewMetrics()
	classic.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "io_latency_seconds",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18)}, []string{"volume", "op"})
	benchReads(b, []benchDev{
		{"classic", newServed(mem, classic, "bench", nil)},
		{"native", newServed(mem, NewMetrics(), "bench", nil)},
		{"native+qos", qos.NewDevice(newServed(mem, NewMetrics(), "bench", nil), qos.NewLimiter(qos.Limits{}), nil)},
		{"native+qos-limited", qos.NewDevice(newServed(mem, NewMetrics(), "bench", nil), qos.NewLimiter(qos.Limits{IOPS: 1 << 40, BPS: 1 << 50}), nil)},
	})
}
