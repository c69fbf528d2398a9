package placement

import (
	"fmt"
	"slices"
	"sort"
)

// Segment is the placement of one existing segment.
type Segment struct {
	Volume string
	Index  int64
	// Shards holds the namespace ID of each shard (index = shard).
	Shards []string
	// AllowSharedDomains is the volume's setting: its shards may share
	// failure domains when there are too few.
	AllowSharedDomains bool
}

func (s Segment) seed() uint64 { return SegmentSeed(s.Volume, s.Index) }

// Move relocates one shard of a segment from one namespace to another.
type Move struct {
	Volume   string
	Segment  int64
	Shard    int
	From, To string
}

// epsilon absorbs float rounding when comparing a spread with its threshold.
const epsilon = 1e-9

// RebalancePlan is the result of PlanRebalance.
type RebalancePlan struct {
	Moves []Move
	// SpreadBefore and SpreadAfter are max(used/capacity) - min(used/capacity)
	// over namespaces in state In, before and after the moves.
	SpreadBefore, SpreadAfter float64
	// Reached reports SpreadAfter <= threshold. When false, no further single
	// move both keeps the domain rule and narrows the spread.
	Reached bool
}

// PlanRebalance plans moves that bring the spread of used/capacity across
// namespaces in state In to at most threshold (a fraction: 0.05 = five
// percentage points). Each step moves one shard (one slot, the smallest unit)
// from the fullest namespace or to the emptiest one, so no plan moves more
// slots than the greedy bound needs; no move breaks the domain rule or
// overshoots (a target never ends fuller than its source was). The cluster is
// not modified.
func PlanRebalance(c *Cluster, segs []Segment, threshold float64) (RebalancePlan, error) {
	if threshold < 0 {
		return RebalancePlan{}, fmt.Errorf("rebalance threshold %g < 0: %w", threshold, ErrInvalid)
	}
	return rebalance(newBalancer(c, segs), c, segs, threshold), nil
}

// stepper is a rebalancing search over a working copy of the cluster: the
// spread now, and one move that narrows it (false: none).
type stepper interface {
	spread() float64
	step() (Move, bool)
}

// rebalance takes b's steps until the spread is at most threshold.
func rebalance(b stepper, c *Cluster, segs []Segment, threshold float64) RebalancePlan {
	plan := RebalancePlan{SpreadBefore: b.spread()}
	// Every step strictly lowers the sum of squared utilisations, so the
	// loop ends; the bound only guards against a bug turning into a hang.
	limit := 4*len(segs)*maxShards(segs) + len(c.ns)
	for b.spread() > threshold+epsilon && len(plan.Moves) < limit {
		m, ok := b.step()
		if !ok {
			break
		}
		plan.Moves = append(plan.Moves, m)
	}
	plan.SpreadAfter = b.spread()
	plan.Reached = plan.SpreadAfter <= threshold+epsilon
	return plan
}

func maxShards(segs []Segment) int {
	n := 0
	for _, s := range segs {
		n = max(n, len(s.Shards))
	}
	return n
}

// shardRef is one shard of one segment in a balancer's working copy.
type shardRef struct {
	seg   int
	shard int
}

// balancer is PlanRebalance's working state.
type balancer struct {
	w      *Cluster
	segs   []Segment    // the segments as given (names, settings)
	shards [][]int      // per segment: the working namespace of each shard, -1 if unknown
	on     [][]shardRef // per namespace: the shards it holds
	// order holds the namespaces in state In with capacity, fullest first
	// (ties by index); pos is each one's place in it (-1 if absent). A move
	// changes two utilisations, so it re-places two entries instead of
	// sorting again.
	order []int
	pos   []int
}

func newBalancer(c *Cluster, segs []Segment) *balancer {
	b := &balancer{w: c.Clone(), segs: segs, shards: make([][]int, len(segs)), on: make([][]shardRef, len(c.ns))}
	flat := make([]int, 0, len(segs)*maxShards(segs))
	for si, s := range segs {
		start := len(flat)
		for j, id := range s.Shards {
			i, ok := c.index[id]
			if !ok {
				i = -1
			} else {
				b.on[i] = append(b.on[i], shardRef{si, j})
			}
			flat = append(flat, i)
		}
		b.shards[si] = flat[start:len(flat):len(flat)]
	}
	b.pos = make([]int, len(c.ns))
	for i, n := range c.ns {
		b.pos[i] = -1
		if n.State == StateIn && n.Capacity > 0 {
			b.order = append(b.order, i)
		}
	}
	slices.SortFunc(b.order, func(x, y int) int {
		if b.fuller(x, y) {
			return -1
		}
		return 1
	})
	for p, i := range b.order {
		b.pos[i] = p
	}
	return b
}

func (b *balancer) util(i int) float64 {
	return float64(b.w.ns[i].Used) / float64(b.w.ns[i].Capacity)
}

// fuller reports whether x comes before y in order: fuller, or as full
// with a smaller index.
func (b *balancer) fuller(x, y int) bool {
	ux, uy := b.util(x), b.util(y)
	return ux > uy || (ux == uy && x < y)
}

// replace moves namespace i to its place in order after its use changed.
func (b *balancer) replace(i int) {
	p := b.pos[i]
	var lo, hi int // the range of order that shifts by one
	switch {
	case p > 0 && b.fuller(i, b.order[p-1]):
		q := sort.Search(p, func(q int) bool { return b.fuller(i, b.order[q]) })
		copy(b.order[q+1:p+1], b.order[q:p])
		b.order[q] = i
		lo, hi = q, p
	case p < len(b.order)-1 && b.fuller(b.order[p+1], i):
		q := p + sort.Search(len(b.order)-p-1, func(k int) bool { return !b.fuller(b.order[p+1+k], i) })
		copy(b.order[p:q], b.order[p+1:q+1])
		b.order[q] = i
		lo, hi = p, q
	default:
		return
	}
	for q := lo; q <= hi; q++ {
		b.pos[b.order[q]] = q
	}
}

func (b *balancer) spread() float64 {
	if len(b.order) == 0 {
		return 0
	}
	return b.util(b.order[0]) - b.util(b.order[len(b.order)-1])
}

// step finds and applies one move that lowers the maximum or raises the
// minimum utilisation: from the fullest namespace to each other, emptiest
// first, then from each other, fullest first, to the emptiest. It reports
// false when no such move exists.
func (b *balancer) step() (Move, bool) {
	last := len(b.order) - 1
	if last < 1 {
		return Move{}, false
	}
	hi, lo := b.order[0], b.order[last]
	bounds := [2]float64{b.util(lo), b.util(hi)}
	for k := last; k >= 1; k-- {
		if m, ok := b.tryMove(hi, b.order[k], bounds); ok {
			return m, true
		}
	}
	for k := 1; k < last; k++ {
		if m, ok := b.tryMove(b.order[k], lo, bounds); ok {
			return m, true
		}
	}
	return Move{}, false
}

// improves reports whether moving one slot from namespace src to dst of w
// keeps both inside the current [min, max] utilisation (so the spread
// cannot widen) and strictly lowers the sum of squared utilisations (so the
// planner always terminates).
func improves(w *Cluster, src, dst int, bounds [2]float64) bool {
	s, d := w.ns[src], w.ns[dst]
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
func (b *balancer) tryMove(src, dst int, bounds [2]float64) (Move, bool) {
	if !improves(b.w, src, dst, bounds) {
		return Move{}, false
	}
	for k, r := range b.on[src] {
		if !b.allowed(r, src, dst) {
			continue
		}
		s := b.segs[r.seg]
		m := Move{Volume: s.Volume, Segment: s.Index, Shard: r.shard, From: b.w.ns[src].ID, To: b.w.ns[dst].ID}
		b.shards[r.seg][r.shard] = dst
		b.on[src] = slices.Delete(b.on[src], k, k+1)
		b.on[dst] = append(b.on[dst], r)
		// replace needs every other entry in place: one use changes, is
		// re-placed, then the other (both first put src in a stale order).
		b.w.ns[src].Used--
		b.replace(src)
		b.w.ns[dst].Used++
		b.replace(dst)
		return m, true
	}
	return Move{}, false
}

// allowed reports whether shard r may move from src to dst (see allowed).
func (b *balancer) allowed(r shardRef, src, dst int) bool {
	return allowed(b.w, b.shards[r.seg], b.segs[r.seg].AllowSharedDomains, r.shard, src, dst)
}

// allowed reports whether shard number shard of a segment may move from
// namespace src to dst of w, with shards the namespaces of the segment's
// shards (-1: not in w): dst holds no shard of the segment, and dst's domain
// is src's, or is used by no other shard of the segment (for volumes
// allowing shared domains: by no more other shards than src's domain is).
func allowed(w *Cluster, shards []int, sharedDomains bool, shard, src, dst int) bool {
	srcDom, dstDom := w.domain[src], w.domain[dst]
	inSrc, inDst := 0, 0
	for j, i := range shards {
		if i < 0 || j == shard {
			continue
		}
		if i == dst {
			return false
		}
		switch w.domain[i] {
		case dstDom:
			inDst++
		case srcDom:
			inSrc++
		}
	}
	if srcDom == dstDom || inDst == 0 {
		return true
	}
	return sharedDomains && inDst < inSrc
}
