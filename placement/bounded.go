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
// namespace. Per domain it keeps the smallest upper bound of a score seen,
// and over the domains the n smallest of those (the largest of them, limit,
// bounds the score of the last namespace the plan picks). A namespace whose
// lower bound exceeds limit, or its domain's bound, cannot be picked and is
// dropped; the rest get their exact score, computed as chooseScan computes
// it, and the best n domains are taken as chooseScan takes them.
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
	var top smallest
	top.n = n
	limit, rawLimit := math.Inf(1), math.Inf(1)
	filter := len(exclude) > 0 || len(used) > 0
	hash, domain := c.hash[:len(c.inv)], c.domain[:len(c.inv)]
	for i, inv := range c.inv {
		if inv == 0 {
			continue
		}
		// With u = unit(h), 1-u is (g+0.5)/2^53 for g the complement of
		// h's top 53 bits; the bounds are kept in units of 2^-53, and g
		// alone, a little lower, is the first test.
		h := mix64(hash[i] ^ seed)
		if float64(int64(^h>>11))*inv > rawLimit {
			continue
		}
		d := domain[i]
		low := (float64(int64(^h>>11)) + 0.5) * inv * lowMargin
		if low > s.best[d] || (filter && (exclude[i] || used[d] > 0)) {
			continue
		}
		if high := low / lowMargin / unit(h) * highMargin; high < s.best[d] {
			s.best[d] = high
			limit = top.add(d, high)
			rawLimit = limit / lowMargin
		}
		s.contended = append(s.contended, contender{ns: i, dom: d, low: low})
	}
	if top.k < n {
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

// smallest holds the n smallest bounds of distinct domains, ascending.
type smallest struct {
	n, k int
	v    [maxBounded]float64
	dom  [maxBounded]int
}

// add records that domain d's bound fell to v and returns the n-th
// smallest bound (+Inf while fewer than n domains have one).
func (t *smallest) add(d int, v float64) float64 {
	j := slices.Index(t.dom[:t.k], d)
	switch {
	case j >= 0:
	case t.k < t.n:
		j, t.k = t.k, t.k+1
	case v < t.v[t.n-1]:
		j = t.n - 1
	default:
		return t.v[t.n-1]
	}
	for ; j > 0 && t.v[j-1] > v; j-- {
		t.v[j], t.dom[j] = t.v[j-1], t.dom[j-1]
	}
	t.v[j], t.dom[j] = v, d
	if t.k < t.n {
		return math.Inf(1)
	}
	return t.v[t.n-1]
}
