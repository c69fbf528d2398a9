package top

import (
	"maps"
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"
)

// Histogram is a latency histogram as counts by bucket upper bound (in
// seconds; +Inf for the last), native buckets turned into their bounds.
// The zero Histogram is empty.
type Histogram struct {
	Counts map[float64]float64
}

// histogramOf reads a Prometheus histogram: its native buckets when it has
// them, else its classic ones.
func histogramOf(h *dto.Histogram) Histogram {
	out := Histogram{Counts: map[float64]float64{}}
	if h == nil {
		return out
	}
	if len(h.GetPositiveSpan()) > 0 || h.GetZeroCount() > 0 {
		out.Counts[h.GetZeroThreshold()] += float64(h.GetZeroCount())
		base := math.Pow(2, math.Pow(2, -float64(h.GetSchema())))
		idx, count := int32(0), int64(0)
		deltas := h.GetPositiveDelta()
		for _, sp := range h.GetPositiveSpan() {
			idx += sp.GetOffset()
			for range sp.GetLength() {
				if len(deltas) == 0 {
					return out
				}
				count += deltas[0]
				deltas = deltas[1:]
				out.Counts[math.Pow(base, float64(idx))] += float64(count)
				idx++
			}
		}
		return out
	}
	prev := 0.0
	for _, b := range h.GetBucket() {
		c := float64(b.GetCumulativeCount())
		out.Counts[b.GetUpperBound()] += c - prev
		prev = c
	}
	out.Counts[math.Inf(1)] += float64(h.GetSampleCount()) - prev
	return out
}

// Add adds o's counts to h.
func (h *Histogram) Add(o Histogram) {
	if h.Counts == nil {
		h.Counts = map[float64]float64{}
	}
	for b, c := range o.Counts {
		h.Counts[b] += c
	}
}

// Sub is h less an earlier reading of it (negative counts, a restart,
// count as h's).
func (h Histogram) Sub(earlier Histogram) Histogram {
	out := Histogram{Counts: map[float64]float64{}}
	for b, c := range h.Counts {
		if d := c - earlier.Counts[b]; d > 0 {
			out.Counts[b] = d
		}
	}
	return out
}

// Quantile is the upper bound of the bucket the q-quantile falls in (0
// when h is empty; +Inf when it falls past the last classic bucket).
func (h Histogram) Quantile(q float64) float64 {
	bounds := slices.Sorted(maps.Keys(h.Counts))
	total := 0.0
	for _, b := range bounds {
		total += h.Counts[b]
	}
	if total == 0 {
		return 0
	}
	rank, seen := q*total, 0.0
	for _, b := range bounds {
		seen += h.Counts[b]
		if seen >= rank {
			return b
		}
	}
	return bounds[len(bounds)-1]
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
