package accept

import "sync/atomic"

// Counts are a server's refusal counters by reason, for its Stats: a fixed
// set of reasons (one counter each, safe for concurrent use), so a
// snapshot lists every reason, zeroes included.
type Counts map[string]*atomic.Uint64

// NewCounts returns a zero counter for each of reasons.
func NewCounts(reasons []string) Counts {
	c := Counts{}
	for _, r := range reasons {
		c[r] = new(atomic.Uint64)
	}
	return c
}

// Add counts one refusal for reason; a reason outside the set is not
// counted.
func (c Counts) Add(reason string) {
	if n := c[reason]; n != nil {
		n.Add(1)
	}
}

// Snapshot returns the counts now, by reason.
func (c Counts) Snapshot() map[string]uint64 {
	m := make(map[string]uint64, len(c))
	for r, n := range c {
		m[r] = n.Load()
	}
	return m
}
