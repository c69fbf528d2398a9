package placement

import (
	"fmt"
	"testing"
)

// The scale planned for: 100 hosts x 10 namespaces, 7.68 TB each in 1 GiB
// slots (7152 slots), 100,000 segments of 4+2.
const (
	benchHosts    = 100
	benchPerHost  = 10
	benchSlots    = 7152
	benchSegments = 100_000
	benchShards   = 6
)

// BenchmarkPlanSegment plans (and reserves) one segment per op on the
// 1,000-namespace cluster.
func BenchmarkPlanSegment(b *testing.B) {
	c := build(b, benchHosts, benchPerHost, benchSlots, 0)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ids, err := PlanSegment(c, benchShards, Options{Seed: SegmentSeed("bench", int64(i))})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Reserve(ids...); err != nil {
			c = build(b, benchHosts, benchPerHost, benchSlots, 0) // full: start over
		}
		i++
	}
}

// BenchmarkPlan100kSegments plans 100,000 segments of 4+2 on 1,000
// namespaces of 100 hosts: one op is the whole volume map.
func BenchmarkPlan100kSegments(b *testing.B) {
	base := build(b, benchHosts, benchPerHost, benchSlots, 0)
	b.ReportAllocs()
	for b.Loop() {
		place(b, base.Clone(), "bench", benchSegments, benchShards)
	}
}

// BenchmarkRebalance100kSegments: 100,000 segments on 100 hosts, then 10
// empty hosts join; one op plans the rebalance to a 5-point spread.
func BenchmarkRebalance100kSegments(b *testing.B) {
	c := build(b, benchHosts+10, benchPerHost, benchSlots, 0)
	for i := benchHosts * benchPerHost; i < len(c.ns); i++ {
		setStateAt(c, i, StateDown) // hidden while placing
	}
	segs := place(b, c, "bench", benchSegments, benchShards)
	for i := range c.ns {
		setStateAt(c, i, StateIn)
	}
	b.ReportAllocs()
	var p RebalancePlan
	for b.Loop() {
		var err error
		if p, err = PlanRebalance(c, segs, 0.05); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(p.Moves)), "moves")
	b.Log(fmt.Sprintf("spread %.3f -> %.3f, %d moves, reached %v", p.SpreadBefore, p.SpreadAfter, len(p.Moves), p.Reached))
}
