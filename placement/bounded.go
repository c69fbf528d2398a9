package placement

import (
	"math"
	"slices"
	"sync"
)

// Bounds on a namespace's rendezvous score, so that only the few namespaces
// that can win need the logarithm. With u its uniform hash and f its free
// slots, the score -ln(u)/f lies between (1-u)/f and (1-u)/(u*f) (from
// 1-u <= -ln(u) <= (1-u)/u). The margins, far above float rounding, keep
// every computed bound on the right side of the computed score.
const (
	lowMargin  = 1 - 1e-9
	highMargin = 1 + 1e-9
)

// maxBounded is the most shards chooseBounded picks; larger plans scan.
const maxBounded = 64

// contender is a namespace that may be the best of its domain: its lower
// bound did not exceed the best upper bound its domain had when it was seen.
type contender struct {
	ns, dom int
	low     float64
}

// scratch is chooseBounded's working memory, reused across calls.
type scratch struct {
	best      []float64 // per domain: the smallest upper bound seen
	contended []contender
	finalists []candidate
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// chooseBounded returns what chooseScan returns when at least n domains
// outside used have a namespace that may receive the shard, and false
// otherwise (then the caller scans). One pass hashes every eligible
// namespace and keeps, per domain, the smallest upper bound of a score; a
// namespace whose lower bound exceeds it cannot be its domain's best and is
// dropped. The n-th smallest of the domains' bounds bounds the score of the
// last namespace picked, so only contenders whose lower bound is under it get
// their exact score, computed as chooseScan computes it.
func (c *Cluster) chooseBounded(n int, seed uint64, exclude map[int]bool, used map[int]int) ([]int, bool) {
	if n > maxBounded {
		return nil, false
	}
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	s.best = slices.Grow(s.best[:0], len(c.domains))[:len(c.domains)]
	for d := range s.best {
		s.best[d] = math.Inf(1)
	}
	s.contended = s.contended[:0]
	filter := len(exclude) > 0 || len(used) > 0
	for i, inv := range c.inv {
		if inv == 0 {
			continue
		}
		d := c.domain[i]
		if filter && (exclude[i] || used[d] > 0) {
			continue
		}
		u := unit(mix64(c.hash[i] ^ seed))
		low := (1 - u) * inv * lowMargin
		if low > s.best[d] {
			continue
		}
		if high := (1 - u) / u * inv * highMargin; high < s.best[d] {
			s.best[d] = high
		}
		s.contended = append(s.contended, contender{ns: i, dom: d, low: low})
	}
	limit, ok := nthSmallest(s.best, n)
	if !ok {
		return nil, false
	}
	s.finalists = s.finalists[:0]
	for _, ct := range s.contended {
		if ct.low <= limit {
			s.finalists = append(s.finalists, candidate{ns: ct.ns, score: c.score(ct.ns, seed)})
		}
	}
	slices.SortFunc(s.finalists, byScore)
	return c.bestOfDomains(s.finalists, n)
}

// bestOfDomains takes, in order, the first candidate of each domain until it
// has n; false if fewer than n domains are present.
func (c *Cluster) bestOfDomains(sorted []candidate, n int) ([]int, bool) {
	out := make([]int, 0, n)
	for _, cd := range sorted {
		if len(out) == n {
			break
		}
		if !slices.ContainsFunc(out, func(p int) bool { return c.domain[p] == c.domain[cd.ns] }) {
			out = append(out, cd.ns)
		}
	}
	return out, len(out) == n
}

// nthSmallest returns the n-th smallest finite value of vs (1 <= n <=
// maxBounded), or false when fewer than n are finite.
func nthSmallest(vs []float64, n int) (float64, bool) {
	var buf [maxBounded]float64
	top := buf[:0] // the smallest so far, ascending
	for _, v := range vs {
		if math.IsInf(v, 1) || (len(top) == n && v >= top[n-1]) {
			continue
		}
		k, _ := slices.BinarySearch(top, v)
		if len(top) < n {
			top = append(top, 0)
		}
		copy(top[k+1:], top[k:])
		top[k] = v
	}
	if len(top) < n {
		return 0, false
	}
	return top[n-1], true
}
