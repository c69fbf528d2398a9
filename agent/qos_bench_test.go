package agent

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nvstripe/nvstripe/blockdev"
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
	mem, err := blockdev.NewMem(64<<20, 4096)
	if err != nil {
		b.Fatal(err)
	}
	classic := NewMetrics()
	classic.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "io_latency_seconds",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18)}, []string{"volume", "op"})
	for _, c := range []struct {
		name string
		dev  blockdev.Device
	}{
		{"classic", newServed(mem, classic, "bench", nil)},
		{"native", newServed(mem, NewMetrics(), "bench", nil)},
		{"native+qos", qos.NewDevice(newServed(mem, NewMetrics(), "bench", nil), qos.NewLimiter(qos.Limits{}), nil)},
		{"native+qos-limited", qos.NewDevice(newServed(mem, NewMetrics(), "bench", nil), qos.NewLimiter(qos.Limits{IOPS: 1 << 40, BPS: 1 << 50}), nil)},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			buf := make([]byte, 4096)
			b.SetBytes(int64(len(buf)))
			for i := 0; b.Loop(); i++ {
				if err := c.dev.ReadAt(ctx, buf, int64(i%16384)*4096); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
