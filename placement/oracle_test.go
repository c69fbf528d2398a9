package placement

import (
	"fmt"
	"slices"
)

// planRebalanceScan is PlanRebalance as it was before it kept its order of
// namespaces between moves: it sorts them again for every move and looks
// shards' namespaces up by name. It is the oracle PlanRebalance must match
// move for move.
func planRebalanceScan(c *Cluster, segs []Segment, threshold float64) (RebalancePlan, error) {
	if threshold < 0 {
		return RebalancePlan{}, fmt.Errorf("rebalance threshold %g < 0: %w", threshold, ErrInvalid)
	}
	return rebalance(newScanBalancer(c, segs), c, segs, threshold), nil
}

// scanBalancer is planRebalanceScan's working state.
type scanBalancer struct {
	w      *Cluster
	segs   []Segment    // working copies of the shards
	on     [][]shardRef // per namespace: the shards it holds
	active []int        // namespaces in state In with capacity
}

func newScanBalancer(c *Cluster, segs []Segment) *scanBalancer {
	b := &scanBalancer{w: c.Clone(), segs: make([]Segment, len(segs)), on: make([][]shardRef, len(c.ns))}
	for si, s := range segs {
		s.Shards = slices.Clone(s.Shards)
		b.segs[si] = s
		for j, id := range s.Shards {
			if i, ok := c.index[id]; ok {
				b.on[i] = append(b.on[i], shardRef{si, j})
			}
		}
	}
	for i, n := range c.ns {
		if n.State == StateIn && n.Capacity > 0 {
			b.active = append(b.active, i)
		}
	}
	return b
}

func (b *scanBalancer) util(i int) float64 {
	return float64(b.w.ns[i].Used) / float64(b.w.ns[i].Capacity)
}

func (b *scanBalancer) spread() float64 {
	if len(b.active) == 0 {
		return 0
	}
	lo, hi := b.util(b.active[0]), b.util(b.active[0])
	for _, i := range b.active[1:] {
		lo, hi = min(lo, b.util(i)), max(hi, b.util(i))
	}
	return hi - lo
}

// step finds and applies one move that lowers the maximum or raises the
// minimum utilisation, trying sources fullest first and targets emptiest
// first. It reports false when no such move exists.
func (b *scanBalancer) step() (Move, bool) {
	order := slices.Clone(b.active)
	slices.SortStableFunc(order, func(x, y int) int {
		ux, uy := b.util(x), b.util(y)
		switch {
		case ux > uy:
			return -1
		case ux < uy:
			return 1
		}
		return x - y
	})
	hi, lo := order[0], order[len(order)-1]
	bounds := [2]float64{b.util(lo), b.util(hi)}
	for _, src := range order {
		for k := len(order) - 1; k >= 0 && order[k] != src; k-- {
			dst := order[k]
			if src != hi && dst != lo {
				continue
			}
			if m, ok := b.tryMove(src, dst, bounds); ok {
				return m, true
			}
		}
	}
	return Move{}, false
}

// tryMove moves a shard from src to dst if the move improves the balance and
// some shard on src may live on dst under the domain rule.
func (b *scanBalancer) tryMove(src, dst int, bounds [2]float64) (Move, bool) {
	if !improves(b.w, src, dst, bounds) {
		return Move{}, false
	}
	d := b.w.ns[dst]
	for k, r := range b.on[src] {
		if !b.allowed(r, src, dst) {
			continue
		}
		s := &b.segs[r.seg]
		m := Move{Volume: s.Volume, Segment: s.Index, Shard: r.shard, From: s.Shards[r.shard], To: d.ID}
		s.Shards[r.shard] = d.ID
		b.on[src] = slices.Delete(b.on[src], k, k+1)
		b.on[dst] = append(b.on[dst], r)
		b.w.ns[src].Used--
		b.w.ns[dst].Used++
		return m, true
	}
	return Move{}, false
}

// allowed reports whether shard r may move from src to dst (see allowed),
// looking the segment's namespaces up by name.
func (b *scanBalancer) allowed(r shardRef, src, dst int) bool {
	s := b.segs[r.seg]
	shards := make([]int, len(s.Shards))
	for j, id := range s.Shards {
		i, ok := b.w.index[id]
		if !ok {
			i = -1
		}
		shards[j] = i
	}
	return allowed(b.w, shards, s.AllowSharedDomains, r.shard, src, dst)
}

// planSegmentScan is PlanSegment scoring every namespace (chooseScan): the
// oracle PlanSegment must match, and the baseline of its benchmarks.
func planSegmentScan(c *Cluster, n int, opts Options) ([]string, error) {
	picked, err := c.chooseScan(n, opts, nil, nil)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(picked))
	for i, p := range picked {
		out[i] = c.ns[p].ID
	}
	return out, nil
}
