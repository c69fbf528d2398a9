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
	b := newScanBalancer(c, segs)
	plan := RebalancePlan{SpreadBefore: b.spread()}
	// Every step strictly lowers the sum of squared utilisations, so the
	// loop ends; the bound only guards against a bug turning into a hang.
	limit := 4*len(b.segs)*maxShards(segs) + len(c.ns)
	for b.spread() > threshold+epsilon && len(plan.Moves) < limit {
		m, ok := b.step()
		if !ok {
			break
		}
		plan.Moves = append(plan.Moves, m)
	}
	plan.SpreadAfter = b.spread()
	plan.Reached = plan.SpreadAfter <= threshold+epsilon
	return plan, nil
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

// improves reports whether moving one slot from src to dst keeps both inside
// the current [min, max] utilisation (so the spread cannot widen) and
// strictly lowers the sum of squared utilisations (so the planner always
// terminates).
func (b *scanBalancer) improves(src, dst int, bounds [2]float64) bool {
	s, d := b.w.ns[src], b.w.ns[dst]
	cs, cd := float64(s.Capacity), float64(d.Capacity)
	us, ud := float64(s.Used)/cs, float64(d.Used)/cd
	if d.Unfenced || d.Free() <= 0 || s.Used <= 0 || (ud+1/cd) > bounds[1] || (us-1/cs) < bounds[0] {
		return false
	}
	// The exact change of the sum of squares is a multiple of 1/(cs²cd²);
	// demanding a margin far above float rounding (about 1e-16 of the terms)
	// keeps a zero change, such as a swap of two utilisations, from passing
	// as an improvement and looping.
	margin := 1e-6 * (1/(cs*cs) + 1/(cd*cd))
	return -2*us/cs+1/(cs*cs)+2*ud/cd+1/(cd*cd) < -margin
}

// tryMove moves a shard from src to dst if the move improves the balance and
// some shard on src may live on dst under the domain rule.
func (b *scanBalancer) tryMove(src, dst int, bounds [2]float64) (Move, bool) {
	if !b.improves(src, dst, bounds) {
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

// allowed reports whether shard r may move from src to dst: dst holds no
// shard of the segment, and dst's domain is src's, or is used by no other
// shard of the segment (for volumes allowing shared domains: by no more
// other shards than src's domain is).
func (b *scanBalancer) allowed(r shardRef, src, dst int) bool {
	s := b.segs[r.seg]
	srcDom, dstDom := b.w.domain[src], b.w.domain[dst]
	inSrc, inDst := 0, 0
	for j, id := range s.Shards {
		i, ok := b.w.index[id]
		if !ok || j == r.shard {
			continue
		}
		if i == dst {
			return false
		}
		switch b.w.domain[i] {
		case dstDom:
			inDst++
		case srcDom:
			inSrc++
		}
	}
	if srcDom == dstDom || inDst == 0 {
		return true
	}
	return s.AllowSharedDomains && inDst < inSrc
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
