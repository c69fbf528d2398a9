package placement

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// build makes a cluster of hosts h0..h(H-1), each with per namespaces
// hX-nY of capacity slots, hosts in racks r(X % racks) when racks > 0.
func build(t testing.TB, hosts, per int, capacity int64, racks int) *Cluster {
	t.Helper()
	return clusterOf(t, hosts, racks, func(host string) (ns []Namespace) {
		for n := range per {
			ns = append(ns, Namespace{ID: fmt.Sprintf("%s-n%d", host, n), Host: host, Capacity: capacity})
		}
		return ns
	})
}

// clusterOf makes a cluster of hosts h0..h(H-1), in racks r(X % racks) when
// racks > 0, each with the namespaces nsOf returns for it (in host order,
// so that property tests draw in a fixed order).
func clusterOf(t rapid.TB, hosts, racks int, nsOf func(host string) []Namespace) *Cluster {
	t.Helper()
	var hs []Host
	var ns []Namespace
	for h := range hosts {
		host := Host{Name: fmt.Sprintf("h%d", h)}
		if racks > 0 {
			host.Labels = map[string]string{"rack": fmt.Sprintf("r%d", h%racks)}
		}
		hs = append(hs, host)
		ns = append(ns, nsOf(host.Name)...)
	}
	label := ""
	if racks > 0 {
		label = "rack"
	}
	c, err := NewCluster(hs, ns, label)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func domainsOf(c *Cluster, ids []string) map[string]int {
	m := map[string]int{}
	for _, id := range ids {
		m[c.Domain(id)]++
	}
	return m
}

func setState(c *Cluster, id string, s State) { setStateAt(c, c.index[id], s) }
func setUsed(c *Cluster, id string, u int64)  { c.ns[c.index[id]].Used = u; c.refresh(c.index[id]) }

func setStateAt(c *Cluster, i int, s State) { c.ns[i].State = s; c.refresh(i) }

func TestNewClusterRejectsBadInput(t *testing.T) {
	h := []Host{{Name: "a"}}
	for _, tc := range []struct {
		name  string
		hosts []Host
		ns    []Namespace
	}{
		{"empty host name", []Host{{}}, nil},
		{"duplicate host", []Host{{Name: "a"}, {Name: "a"}}, nil},
		{"unknown host", h, []Namespace{{ID: "x", Host: "b", Capacity: 1}}},
		{"duplicate ns", h, []Namespace{{ID: "x", Host: "a"}, {ID: "x", Host: "a"}}},
		{"empty ns id", h, []Namespace{{Host: "a"}}},
		{"used over capacity", h, []Namespace{{ID: "x", Host: "a", Capacity: 1, Used: 2}}},
		{"negative used", h, []Namespace{{ID: "x", Host: "a", Capacity: 1, Used: -1}}},
	} {
		if _, err := NewCluster(tc.hosts, tc.ns, ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err=%v, want ErrInvalid", tc.name, err)
		}
	}
}

func TestPlanSegmentRules(t *testing.T) {
	for _, tc := range []struct {
		name        string
		c           func() *Cluster
		n           int
		shared      bool
		wantErr     error
		maxInDomain int
	}{
		{"hosts are domains", func() *Cluster { return build(t, 6, 3, 10, 0) }, 6, false, nil, 1},
		{"racks are domains", func() *Cluster { return build(t, 6, 2, 10, 3) }, 3, false, nil, 1},
		{"too few racks", func() *Cluster { return build(t, 6, 2, 10, 3) }, 4, false, ErrNotEnoughDomains, 0},
		{"too few racks, shared evenly", func() *Cluster { return build(t, 6, 2, 10, 3) }, 6, true, nil, 2},
		{"too few hosts", func() *Cluster { return build(t, 3, 4, 10, 0) }, 4, false, ErrNotEnoughDomains, 0},
		{"too few namespaces even shared", func() *Cluster { return build(t, 2, 2, 10, 0) }, 5, true, ErrNoSpace, 0},
		{"domains full", func() *Cluster {
			c := build(t, 4, 1, 10, 0)
			setUsed(c, "h3-n0", 10)
			return c
		}, 4, false, ErrNoSpace, 0},
		{"domain out of service", func() *Cluster {
			c := build(t, 4, 1, 10, 0)
			setState(c, "h3-n0", StateOut)
			return c
		}, 4, false, ErrNotEnoughDomains, 0},
		{"zero shards", func() *Cluster { return build(t, 4, 1, 10, 0) }, 0, false, ErrInvalid, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c()
			got, err := PlanSegment(c, tc.n, Options{Seed: 7, AllowSharedDomains: tc.shared})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err=%v want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if len(got) != tc.n || len(slices.Compact(slices.Sorted(slices.Values(got)))) != tc.n {
				t.Fatalf("got %v: want %d distinct namespaces", got, tc.n)
			}
			for d, k := range domainsOf(c, got) {
				if k > tc.maxInDomain {
					t.Errorf("domain %s holds %d shards, max %d: %v", d, k, tc.maxInDomain, got)
				}
			}
		})
	}
}

func TestPlanSegmentOnlyInServiceWithSpace(t *testing.T) {
	c := build(t, 6, 2, 10, 0)
	setState(c, "h0-n0", StateDraining)
	setState(c, "h1-n0", StateDown)
	setState(c, "h2-n0", StateOut)
	setState(c, "h3-n0", StateFailed)
	setUsed(c, "h4-n0", 10)
	bad := []string{"h0-n0", "h1-n0", "h2-n0", "h3-n0", "h4-n0"}
	for seed := range uint64(200) {
		got, err := PlanSegment(c, 6, Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range got {
			if slices.Contains(bad, id) {
				t.Fatalf("seed %d placed a shard on %s: %v", seed, id, got)
			}
		}
	}
}

func TestPlanSegmentDeterministicAndSpread(t *testing.T) {
	c := build(t, 10, 4, 100, 0)
	seen := map[string]bool{}
	for seed := range uint64(100) {
		a, _ := PlanSegment(c, 4, Options{Seed: seed})
		b, _ := PlanSegment(c.Clone(), 4, Options{Seed: seed})
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d: %v then %v", seed, a, b)
		}
		for _, id := range a {
			seen[id] = true
		}
	}
	if len(seen) < 36 {
		t.Errorf("100 segments touched only %d of 40 namespaces", len(seen))
	}
}

func TestPlanSegmentWeightedByFreeSlots(t *testing.T) {
	c := build(t, 2, 1, 400, 0) // h0-n0 has 300 free, h1-n0 100 free
	setUsed(c, "h0-n0", 100)
	setUsed(c, "h1-n0", 300)
	count := map[string]int{}
	for seed := range uint64(4000) {
		got, err := PlanSegment(c, 1, Options{Seed: SegmentSeed("v", int64(seed))})
		if err != nil {
			t.Fatal(err)
		}
		count[got[0]]++
	}
	ratio := float64(count["h0-n0"]) / float64(count["h1-n0"])
	if ratio < 2.5 || ratio > 3.5 {
		t.Errorf("choice ratio %.2f (%v), want about 3 (free 300 vs 100)", ratio, count)
	}
}

func TestPlanRebuild(t *testing.T) {
	c := build(t, 5, 2, 10, 0)
	shards := []string{"h0-n0", "h1-n0", "h2-n0", "h3-n0"}
	for seed := range uint64(50) {
		got, err := PlanRebuild(c, shards, 2, Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if d := c.Domain(got); got == "h2-n0" || (d != "host=h4" && d != "host=h2") {
			t.Fatalf("seed %d: replacement %s, want on h4 or h2 (the lost shard's host), not h2-n0", seed, got)
		}
	}
	setState(c, "h2-n1", StateOut)
	setState(c, "h4-n0", StateFailed)
	setUsed(c, "h4-n1", 10)
	if _, err := PlanRebuild(c, shards, 2, Options{}); !errors.Is(err, ErrNoSpace) {
		t.Errorf("h4 unusable: err=%v want ErrNoSpace", err)
	}
	// With shared domains allowed it may go next to a survivor, never onto
	// a namespace of the segment (h2-n0 is the lost one).
	got, err := PlanRebuild(c, shards, 2, Options{AllowSharedDomains: true})
	if err != nil || slices.Contains(shards, got) {
		t.Errorf("shared rebuild: %s, %v", got, err)
	}
	if _, err := PlanRebuild(c, shards, 4, Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("lost index out of range: %v", err)
	}
}

// place plans and reserves count segments of n shards on c.
func place(t testing.TB, c *Cluster, vol string, count, n int) []Segment {
	t.Helper()
	return placeWith(t, c, PlanSegment, vol, count, n)
}

// placeWith is place with the given planner.
func placeWith(t testing.TB, c *Cluster, plan func(*Cluster, int, Options) ([]string, error), vol string, count, n int) []Segment {
	t.Helper()
	segs := make([]Segment, 0, count)
	for i := range count {
		ids, err := plan(c, n, Options{Seed: SegmentSeed(vol, int64(i))})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Reserve(ids...); err != nil {
			t.Fatal(err)
		}
		segs = append(segs, Segment{Volume: vol, Index: int64(i), Shards: ids})
	}
	return segs
}

// apply returns the segments after the moves, checking each move's From.
func apply(t *testing.T, segs []Segment, moves []Move) []Segment {
	t.Helper()
	out := slices.Clone(segs)
	for i := range out {
		out[i].Shards = slices.Clone(out[i].Shards)
	}
	for _, m := range moves {
		s := &out[m.Segment]
		if s.Shards[m.Shard] != m.From {
			t.Fatalf("move %+v: shard is on %s", m, s.Shards[m.Shard])
		}
		s.Shards[m.Shard] = m.To
	}
	return out
}

// TestPlanRebalanceFewestMoves: three full-ish namespaces and a new empty
// one; the cheapest plan within 10 points moves exactly 30 slots.
func TestPlanRebalanceFewestMoves(t *testing.T) {
	c := build(t, 4, 1, 100, 0)
	var segs []Segment
	for i := range 150 {
		id := fmt.Sprintf("h%d-n0", i%3)
		segs = append(segs, Segment{Volume: "v", Index: int64(i), Shards: []string{id}})
		_ = c.Reserve(id)
	}
	p, err := PlanRebalance(c, segs, 0.10)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Reached || len(p.Moves) != 30 || p.SpreadBefore != 0.5 {
		t.Fatalf("plan: %d moves, spread %.2f -> %.2f, reached %v", len(p.Moves), p.SpreadBefore, p.SpreadAfter, p.Reached)
	}
	for _, m := range p.Moves {
		if m.To != "h3-n0" {
			t.Fatalf("move %+v: want all moves onto the empty namespace", m)
		}
	}
	if p, _ := PlanRebalance(c, segs, 0.6); len(p.Moves) != 0 || !p.Reached {
		t.Errorf("already within threshold: %+v", p)
	}
}

func TestPlanRebalanceKeepsDomainRule(t *testing.T) {
	c := build(t, 6, 2, 40, 0)
	segs := place(t, c, "v", 60, 5)
	// Add an empty host: a rebuilt cluster with two more namespaces.
	hosts := []Host{{Name: "h6"}}
	for i := range 6 {
		hosts = append(hosts, Host{Name: fmt.Sprintf("h%d", i)})
	}
	ns := append(c.Namespaces(), Namespace{ID: "h6-n0", Host: "h6", Capacity: 40}, Namespace{ID: "h6-n1", Host: "h6", Capacity: 40})
	c2, err := NewCluster(hosts, ns, "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := PlanRebalance(c2, segs, 0.05)
	if err != nil || !p.Reached || len(p.Moves) == 0 {
		t.Fatalf("plan %+v err %v", p, err)
	}
	used := map[string]int{}
	for _, s := range apply(t, segs, p.Moves) {
		if d := domainsOf(c2, s.Shards); len(d) != 5 {
			t.Fatalf("segment %d shares a domain after rebalance: %v", s.Index, s.Shards)
		}
		for _, id := range s.Shards {
			used[id]++
		}
	}
	for _, n := range c2.Namespaces() {
		if used[n.ID] > int(n.Capacity) {
			t.Errorf("%s holds %d of %d", n.ID, used[n.ID], n.Capacity)
		}
	}
}

func TestStateNames(t *testing.T) {
	for s := StateIn; s <= StateFailed; s++ {
		got, err := ParseState(s.String())
		if err != nil || got != s {
			t.Errorf("%v: %v %v", s, got, err)
		}
	}
	if _, err := ParseState("gone"); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown state: %v", err)
	}
}

func TestReserveRelease(t *testing.T) {
	c := build(t, 1, 2, 1, 0)
	if err := c.Reserve("h0-n0", "h0-n1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Reserve("h0-n1"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("reserve over capacity: %v", err)
	}
	if err := c.Release("h0-n0", "zz"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("release unknown: %v", err)
	}
	if n, _ := c.Namespace("h0-n0"); n.Used != 1 {
		t.Fatalf("failed release changed the cluster: %+v", n)
	}
}

// TestPlanRebalanceNoSwapLoop: moving a slot from 6/10 to 5/10 only swaps
// the two utilisations; the planner must see no gain and stop.
func TestPlanRebalanceNoSwapLoop(t *testing.T) {
	c := build(t, 2, 1, 10, 0)
	var segs []Segment
	for i := range 11 {
		id := "h0-n0"
		if i >= 6 {
			id = "h1-n0"
		}
		segs = append(segs, Segment{Volume: "v", Index: int64(i), Shards: []string{id}})
		_ = c.Reserve(id)
	}
	p, err := PlanRebalance(c, segs, 0)
	if err != nil || len(p.Moves) != 0 || p.Reached {
		t.Fatalf("plan %+v, %v: want no moves and not reached", p, err)
	}
}
