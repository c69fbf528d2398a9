package placement

import (
	"fmt"
	"math"
	"slices"
)

// Options tune one plan. The zero value is valid.
type Options struct {
	// Seed makes the choice differ between segments while staying
	// deterministic. Use SegmentSeed(volume, index). Default 0.
	Seed uint64
	// AllowSharedDomains lets shards of one segment share a failure domain
	// when there are fewer domains than shards (shared as evenly as
	// possible). Default false: such a plan fails with ErrNotEnoughDomains.
	AllowSharedDomains bool
}

// SegmentSeed is the seed of segment index of a volume: a hash of both.
func SegmentSeed(volume string, index int64) uint64 {
	return mix64(hashString(volume) ^ mix64(uint64(index)+0x9e3779b97f4a7c15))
}

// hashString is 64-bit FNV-1a.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix64 is the splitmix64 finaliser: a bijective avalanche of x.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// PlanSegment chooses n distinct namespaces for the shards of a new segment;
// shard i goes to the i-th returned namespace ID. See the package doc for the
// rules. Errors: ErrNoSpace, ErrNotEnoughDomains, ErrInvalid (n < 1).
func PlanSegment(c *Cluster, n int, opts Options) ([]string, error) {
	if n < 1 {
		return nil, fmt.Errorf("segment of %d shards: %w", n, ErrInvalid)
	}
	picked, err := c.choose(n, opts, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("place %d shards: %w", n, err)
	}
	out := make([]string, len(picked))
	for i, p := range picked {
		out[i] = c.ns[p].ID
	}
	return out, nil
}

// PlanRebuild chooses the namespace that receives shard lost of a segment
// whose shards are on the namespaces in shards (index = shard). The new
// namespace is none of shards and, while possible, in a failure domain no
// surviving shard uses. Errors as PlanSegment.
func PlanRebuild(c *Cluster, shards []string, lost int, opts Options) (string, error) {
	if lost < 0 || lost >= len(shards) {
		return "", fmt.Errorf("lost shard %d of %d: %w", lost, len(shards), ErrInvalid)
	}
	id, err := c.replace(shards, lost, opts)
	if err != nil {
		return "", fmt.Errorf("rebuild shard %d: %w", lost, err)
	}
	return id, nil
}

// replace picks a new home for shards[j], away from every namespace in shards
// and from the domains of the other shards.
func (c *Cluster) replace(shards []string, j int, opts Options) (string, error) {
	exclude := make(map[int]bool, len(shards))
	used := make(map[int]int, len(shards))
	for s, id := range shards {
		i, ok := c.index[id]
		if !ok {
			continue // an unknown (removed) namespace excludes nothing
		}
		exclude[i] = true
		if s != j {
			used[c.domain[i]]++
		}
	}
	opts.Seed = mix64(opts.Seed ^ uint64(j+1))
	picked, err := c.choose(1, opts, exclude, used)
	if err != nil {
		return "", err
	}
	return c.ns[picked[0]].ID, nil
}

// candidate is one namespace with its rendezvous score (smaller wins).
type candidate struct {
	ns    int
	score float64
}

// eligible reports whether namespace i may receive a new shard.
func (c *Cluster) eligible(i int) bool {
	return c.ns[i].State == StateIn && !c.ns[i].Unfenced && c.ns[i].Free() > 0
}

// score is the weighted-rendezvous key of namespace i: -ln(u)/free with u a
// uniform hash of (seed, namespace). The smallest key wins, which picks each
// namespace with probability proportional to its free slots.
func (c *Cluster) score(i int, seed uint64) float64 {
	return -math.Log(unit(mix64(c.hash[i]^seed))) / float64(c.ns[i].Free())
}

// unit maps a hash to a uniform float in (0, 1).
func unit(h uint64) float64 { return (float64(h>>11) + 0.5) / (1 << 53) }

// choose picks n eligible namespaces outside exclude. Domains counted in used
// (already holding shards of the segment) are avoided while possible. The
// result is in pick order. It is chooseScan's result; chooseBounded finds it
// without computing every namespace's score when enough domains are free.
func (c *Cluster) choose(n int, opts Options, exclude map[int]bool, used map[int]int) ([]int, error) {
	if picked, ok := c.chooseBounded(n, opts.Seed, exclude, used); ok {
		return picked, nil
	}
	return c.chooseScan(n, opts, exclude, used)
}

// chooseScan is choose by scoring every eligible namespace: the best of each
// domain, then the best n domains, or fillShared when too few are free.
func (c *Cluster) chooseScan(n int, opts Options, exclude map[int]bool, used map[int]int) ([]int, error) {
	best := make([]candidate, len(c.domains)) // best candidate per domain
	for d := range best {
		best[d].ns = -1
	}
	var all []candidate
	for i := range c.ns {
		if !c.eligible(i) || exclude[i] {
			continue
		}
		cd := candidate{ns: i, score: c.score(i, opts.Seed)}
		if opts.AllowSharedDomains {
			all = append(all, cd)
		}
		if b := &best[c.domain[i]]; b.ns < 0 || cd.score < b.score {
			*b = cd
		}
	}
	fresh := make([]candidate, 0, len(best)) // the best namespace of each unused domain
	for d, b := range best {
		if b.ns >= 0 && used[d] == 0 {
			fresh = append(fresh, b)
		}
	}
	slices.SortFunc(fresh, byScore)
	if len(fresh) >= n {
		return nsOf(fresh[:n]), nil
	}
	if !opts.AllowSharedDomains {
		return nil, c.shortage(n, len(fresh), exclude, used)
	}
	if len(all) < n {
		return nil, fmt.Errorf("%d namespaces in service have free slots, need %d: %w", len(all), n, ErrNoSpace)
	}
	return c.fillShared(n, all, used), nil
}

// fillShared picks n of all, each time from the domain holding the fewest
// shards so far, best score first.
func (c *Cluster) fillShared(n int, all []candidate, used map[int]int) []int {
	slices.SortFunc(all, byScore)
	count := make(map[int]int, len(used))
	for d, k := range used {
		count[d] = k
	}
	taken := make([]bool, len(all))
	out := make([]int, 0, n)
	for len(out) < n {
		pick := -1
		for k, cd := range all {
			if !taken[k] && (pick < 0 || count[c.domain[cd.ns]] < count[c.domain[all[pick].ns]]) {
				pick = k
			}
		}
		taken[pick] = true
		count[c.domain[all[pick].ns]]++
		out = append(out, all[pick].ns)
	}
	return out
}

// shortage explains why fewer than n fresh domains were found: the domains
// exist but are full (ErrNoSpace) or they do not exist (ErrNotEnoughDomains).
func (c *Cluster) shortage(n, found int, exclude map[int]bool, used map[int]int) error {
	inService := map[int]bool{}
	for i, ns := range c.ns {
		if ns.State == StateIn && !exclude[i] && used[c.domain[i]] == 0 {
			inService[c.domain[i]] = true
		}
	}
	if len(inService) >= n {
		return fmt.Errorf("%d failure domains have free slots, need %d: %w", found, n, ErrNoSpace)
	}
	return fmt.Errorf("%d usable failure domains, need %d (allow shared domains to place anyway): %w",
		len(inService), n, ErrNotEnoughDomains)
}

func byScore(a, b candidate) int {
	switch {
	case a.score < b.score:
		return -1
	case a.score > b.score:
		return 1
	}
	return a.ns - b.ns
}

func nsOf(cs []candidate) []int {
	out := make([]int, len(cs))
	for i, cd := range cs {
		out[i] = cd.ns
	}
	return out
}
