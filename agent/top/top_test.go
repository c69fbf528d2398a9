package top

import (
	"math"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// native is a schema 3 histogram: 5 observations in bucket -100, 5 in -99,
// 1 in -98 (delta encoded), as the protobuf exposition carries it.
func native(scale int64) *dto.Histogram {
	return &dto.Histogram{Schema: ptr[int32](3), ZeroThreshold: ptr(1e-128),
		PositiveSpan:  []*dto.BucketSpan{{Offset: ptr[int32](-100), Length: ptr[uint32](3)}},
		PositiveDelta: []int64{5 * scale, 0, -4 * scale}}
}

// TestHistogramNative: native buckets become their upper bounds
// (2^(i/8)), percentiles fall on the bucket they are in, and the
// difference of two readings holds only what came between them.
func TestHistogramNative(t *testing.T) {
	b := func(i int) float64 { return math.Pow(math.Pow(2, 1.0/8), float64(i)) }
	h := histogramOf(native(1))
	for i, want := range map[int]float64{-100: 5, -99: 5, -98: 1} {
		if got := h.Counts[b(i)]; got != want {
			t.Errorf("bucket %d: %v, want %v (all: %v)", i, got, want, h.Counts)
		}
	}
	if q := h.Quantile(0.5); q != b(-99) {
		t.Errorf("p50 = %v, want bucket -99's bound %v", q, b(-99))
	}
	if q := h.Quantile(0.9999); q != b(-98) {
		t.Errorf("p99.99 = %v, want bucket -98's bound %v", q, b(-98))
	}
	later := histogramOf(native(3)) // 10 more, 10 more, 2 more
	d := later.Sub(h)
	if d.Counts[b(-100)] != 10 || d.Counts[b(-98)] != 2 || d.Quantile(0.99) != b(-98) {
		t.Errorf("difference: %v", d.Counts)
	}
	if (Histogram{}).Quantile(0.99) != 0 {
		t.Error("an empty histogram has a percentile")
	}
}

// TestHistogramClassic: without native buckets the classic ones count,
// observations past the last bound in +Inf.
func TestHistogramClassic(t *testing.T) {
	h := histogramOf(&dto.Histogram{SampleCount: ptr[uint64](10), Bucket: []*dto.Bucket{
		{UpperBound: ptr(0.001), CumulativeCount: ptr[uint64](6)},
		{UpperBound: ptr(0.002), CumulativeCount: ptr[uint64](9)}}})
	if h.Quantile(0.5) != 0.001 || h.Quantile(0.9) != 0.002 || !math.IsInf(h.Quantile(0.99), 1) {
		t.Errorf("classic: %v; p50 %v p90 %v p99 %v", h.Counts, h.Quantile(0.5), h.Quantile(0.9), h.Quantile(0.99))
	}
}

// TestRates: rates are the counters' increase over the time between the
// readings; a counter that went down (a restart) counts from zero; a
// volume new in the later reading counts from zero.
func TestRates(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := Reading{At: t0, Volumes: map[string]*Counters{"a": {Reads: 100, ReadBytes: 409600, Delayed: 10, WaitSeconds: 1}}}
	cur := Reading{At: t0.Add(2 * time.Second), Volumes: map[string]*Counters{
		"a": {Reads: 300, ReadBytes: 409600 + 2*819200, Delayed: 30, WaitSeconds: 2, Limits: map[string]float64{"iops": 100, "bps": 0}},
		"b": {Writes: 50},
	}}
	rows := Rates(prev, cur)
	if len(rows) != 2 || rows[0].Volume != "a" || rows[1].Volume != "b" {
		t.Fatalf("rows: %+v", rows)
	}
	a := rows[0]
	if a.ReadIOPS != 100 || a.ReadBytes != 819200 || a.QoSDelayed != 10 || a.QoSWait != 0.05 || len(a.Limits) != 1 {
		t.Errorf("a: %+v", a)
	}
	if rows[1].WriteIOPS != 25 {
		t.Errorf("b: %+v", rows[1])
	}
	cur.Volumes["a"].Reads = 40 // restarted
	if r := Rates(prev, cur)[0]; r.ReadIOPS != 20 {
		t.Errorf("after a restart: %v reads a second, want 20", r.ReadIOPS)
	}
}

func ptr[T any](v T) *T { return &v }

// TestWriteRows: the table shows a volume's rates, latencies, QoS delays
// and limits in the units people read.
func TestWriteRows(t *testing.T) {
	var b strings.Builder
	err := WriteRows(&b, []Row{{Volume: "ckpt", ReadIOPS: 2000, WriteIOPS: 10, ReadBytes: 8 << 20, WriteBytes: 1 << 30,
		P50: 0.000123, P99: 0.0021, P9999: 0.35, QoSDelayed: 1990, QoSWait: 0.016, Limits: map[string]float64{"iops": 2000, "write_bps": 500 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ckpt", "2000", "8 MiB", "1 GiB", "123µs", "2.1ms", "350ms", "1990", "16ms", "iops=2000 write_bps=500 MiB/s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
