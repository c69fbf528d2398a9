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

// planners are PlanSegment and the scan it replaced, for A/B runs.
var planners = []struct {
	name string
	plan func(*Cluster, int, Options) ([]string, error)
}{{"new", PlanSegment}, {"scan", planSegmentScan}}

// BenchmarkPlan100kSegments plans 100,000 segments of 4+2 on 1,000
// namespaces of 100 hosts: one op is the whole volume map.
func BenchmarkPlan100kSegments(b *testing.B) {
	base := build(b, benchHosts, benchPerHost, benchSlots, 0)
	for _, p := range planners {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				placeWith(b, base.Clone(), p.plan, "bench", benchSegments, benchShards)
			}
		})
	}
}

// BenchmarkPlan100kSegments1000Hosts plans 100,000 segments of 4+2 on
// 16,000 namespaces of 1,000 hosts in 50 racks (the racks are the failure
// domains). Every plan still hashes every namespace, so this costs about
// 16 times BenchmarkPlan100kSegments/new; the scan is left out (minutes).
func BenchmarkPlan100kSegments1000Hosts(b *testing.B) {
	base := build(b, 1000, 16, benchSlots, 50)
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			place(b, base.Clone(), "bench", benchSegments, benchShards)
		}
	})
}

// rebalancers are PlanRebalance and the planner it replaced, for A/B runs.
var rebalancers = []struct {
	name string
	plan func(*Cluster, []Segment, float64) (RebalancePlan, error)
}{{"new", PlanRebalance}, {"scan", planRebalanceScan}}

// BenchmarkRebalance100kSegments: 100,000 segments on 100 hosts, then 10
// empty hosts join; one op plans the rebalance to a 5-point spread.
func BenchmarkRebalance100kSegments(b *testing.B) {
	c, segs := joined(b, benchHosts, benchPerHost, benchSlots, 10)
	for _, r := range rebalancers {
		b.Run(r.name, func(b *testing.B) { benchRebalance(b, c, segs, r.plan) })
	}
}

// BenchmarkRebalance1000Hosts: 100,000 segments of 4+2 laid out evenly on
// 1,000 hosts of 16 namespaces of 512 slots (7% full), then 100 empty hosts
// join; one op plans the rebalance of the 17,600 namespaces to a 5-point
// spread. The scan it replaced takes minutes here and is left out.
func BenchmarkRebalance1000Hosts(b *testing.B) {
	const hosts, per = 1000, 16
	c := build(b, hosts+100, per, 512, 0)
	segs := make([]Segment, 0, benchSegments)
	for i := range benchSegments {
		s := Segment{Volume: "bench", Index: int64(i)}
		for j := range benchShards { // distinct hosts: 167*j mod 1000 differ for j < 6
			h, n := (i+167*j)%hosts, (i/hosts+j)%per
			s.Shards = append(s.Shards, fmt.Sprintf("h%d-n%d", h, n))
		}
		if err := c.Reserve(s.Shards...); err != nil {
			b.Fatal(err)
		}
		segs = append(segs, s)
	}
	b.Run("new", func(b *testing.B) { benchRebalance(b, c, segs, PlanRebalance) })
}

// joined places benchSegments segments on hosts x per namespaces of slots
// each, then adds extra empty hosts.
func joined(b *testing.B, hosts, per int, slots int64, extra int) (*Cluster, []Segment) {
	c := build(b, hosts+extra, per, slots, 0)
	for i := hosts * per; i < len(c.ns); i++ {
		setStateAt(c, i, StateDown) // hidden while placing
	}
	segs := place(b, c, "bench", benchSegments, benchShards)
	for i := range c.ns {
		setStateAt(c, i, StateIn)
	}
	return c, segs
}

func benchRebalance(b *testing.B, c *Cluster, segs []Segment, plan func(*Cluster, []Segment, float64) (RebalancePlan, error)) {
	b.ReportAllocs()
	var p RebalancePlan
	for b.Loop() {
		var err error
		if p, err = plan(c, segs, 0.05); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(p.Moves)), "moves")
	b.Log(fmt.Sprintf("spread %.3f -> %.3f, %d moves, reached %v", p.SpreadBefore, p.SpreadAfter, len(p.Moves), p.Reached))
}
