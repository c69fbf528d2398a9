// Package placement decides where the shards of nvstripe's segments go: the
// k+m namespaces of a new segment (PlanSegment), a replacement for a lost
// shard (PlanRebuild) and the moves that even out capacity use
// (PlanRebalance). Drains are planned by the controller's Decide, a shard at
// a time, each destination chosen by PlanRebuild.
//
// Rules every plan keeps:
//  1. Domain rule: no two shards of a segment share a failure domain while
//     enough domains exist. A domain is a host, or the value of a host label
//     (rack, row) when the Cluster is built with a domain label. Sharing a
//     domain is allowed only with AllowSharedDomains, and then spread evenly.
//  2. Only namespaces in state In with a free slot receive shards.
//  3. Among allowed namespaces the choice is weighted by free slots
//     (weighted rendezvous hashing), so emptier namespaces fill first while
//     different segments still spread over the whole cluster.
//  4. Plans are deterministic: the same Cluster, inputs and Options.Seed give
//     the same plan. Randomness is a hash of the seed (SegmentSeed), never a
//     clock or a global generator.
//
// Everything here is a pure function of its arguments. A *Cluster is a
// snapshot value; Reserve and Release change its used counts and are not safe
// for concurrent use with other calls on the same Cluster. Plan functions
// never modify the Cluster they are given (they work on a Clone when they
// need to simulate).
package placement

import (
	"errors"
	"fmt"
	"sort"
)

// Errors returned by the planners, tested with errors.Is.
var (
	// ErrNoSpace: not enough free slots on allowed namespaces.
	ErrNoSpace = errors.New("placement: not enough free space")
	// ErrNotEnoughDomains: the plan needs more distinct failure domains than
	// the cluster has, and AllowSharedDomains is off.
	ErrNotEnoughDomains = errors.New("placement: not enough failure domains")
	// ErrInvalid: malformed input (unknown host, duplicate namespace, ...).
	ErrInvalid = errors.New("placement: invalid input")
)

// State is a namespace's administrative and health state.
type State uint8

// Namespace states. Only StateIn receives new shards.
const (
	StateIn       State = iota // healthy, in service
	StateDraining              // shards are being moved away; no new shards
	StateDown                  // unreachable, within its grace period
	StateOut                   // out of service; its shards are rebuilt elsewhere
	StateFailed                // failed (IO errors); its shards are rebuilt elsewhere
	StateDrained               // drained: holds no shard, takes none; may be removed
)

var stateNames = [...]string{"in", "draining", "down", "out", "failed", "drained"}

// String returns the state's name as stored and shown: in, draining, down,
// out, failed, drained.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// ParseState parses a state name (see State.String).
func ParseState(name string) (State, error) {
	for i, n := range stateNames {
		if n == name {
			return State(i), nil
		}
	}
	return 0, fmt.Errorf("unknown namespace state %q (want in, draining, down, out, failed or drained): %w", name, ErrInvalid)
}

// Host is a storage host and its failure-domain labels.
type Host struct {
	Name   string
	Labels map[string]string
}

// Namespace is one namespace as placement sees it: capacity and use in slots.
type Namespace struct {
	ID       string
	Host     string
	State    State
	Capacity int64 // usable slots
	Used     int64 // allocated slots, 0 <= Used <= Capacity
	// Unfenced: the namespace cannot refuse a stale owner's writes and the
	// operator did not allow it; it receives no new shard.
	Unfenced bool
}

// Free returns the number of free slots.
func (n Namespace) Free() int64 { return n.Capacity - n.Used }

// Cluster is a validated snapshot of hosts and namespaces with precomputed
// failure domains.
//
// Invariants (checked by NewCluster):
//  1. Host names and namespace IDs are unique and non-empty.
//  2. Every namespace's host exists.
//  3. 0 <= Used <= Capacity for every namespace.
type Cluster struct {
	ns      []Namespace
	index   map[string]int
	domain  []int    // per namespace: index into domains
	domains []string // domain names, sorted
	hash    []uint64 // per namespace: hash of its ID
	// inv per namespace: 1/free slots while it may receive a shard, else 0.
	// Kept current by Reserve and Release; the planners read it instead of
	// checking state and space namespace by namespace.
	inv []float64
}

// NewCluster validates hosts and namespaces and builds a Cluster. The failure
// domain of a host is the value of its label domainLabel, or the host itself
// when domainLabel is empty or the host lacks that label.
func NewCluster(hosts []Host, namespaces []Namespace, domainLabel string) (*Cluster, error) {
	hostDomain := make(map[string]string, len(hosts))
	for _, h := range hosts {
		if h.Name == "" {
			return nil, fmt.Errorf("host with empty name: %w", ErrInvalid)
		}
		if _, dup := hostDomain[h.Name]; dup {
			return nil, fmt.Errorf("duplicate host %q: %w", h.Name, ErrInvalid)
		}
		d := "host=" + h.Name
		if v, ok := h.Labels[domainLabel]; ok && domainLabel != "" && v != "" {
			d = domainLabel + "=" + v
		}
		hostDomain[h.Name] = d
	}
	c := &Cluster{ns: append([]Namespace(nil), namespaces...), index: make(map[string]int, len(namespaces))}
	names := map[string]int{}
	for i, n := range c.ns {
		if err := c.checkNamespace(n, hostDomain); err != nil {
			return nil, err
		}
		c.index[n.ID] = i
		names[hostDomain[n.Host]] = 0
		c.hash = append(c.hash, hashString(n.ID))
	}
	for d := range names {
		c.domains = append(c.domains, d)
	}
	sort.Strings(c.domains)
	for i, d := range c.domains {
		names[d] = i
	}
	c.inv = make([]float64, len(c.ns))
	for i, n := range c.ns {
		c.domain = append(c.domain, names[hostDomain[n.Host]])
		c.refresh(i)
	}
	return c, nil
}

// refresh recomputes inv[i] after namespace i's state or use changed.
func (c *Cluster) refresh(i int) {
	c.inv[i] = 0
	if c.eligible(i) {
		c.inv[i] = 1 / float64(c.ns[i].Free())
	}
}

func (c *Cluster) checkNamespace(n Namespace, hostDomain map[string]string) error {
	switch {
	case n.ID == "":
		return fmt.Errorf("namespace with empty id: %w", ErrInvalid)
	case hostDomain[n.Host] == "":
		return fmt.Errorf("namespace %q: unknown host %q: %w", n.ID, n.Host, ErrInvalid)
	case n.Capacity < 0 || n.Used < 0 || n.Used > n.Capacity:
		return fmt.Errorf("namespace %q: used %d of capacity %d: %w", n.ID, n.Used, n.Capacity, ErrInvalid)
	}
	if _, dup := c.index[n.ID]; dup {
		return fmt.Errorf("duplicate namespace %q: %w", n.ID, ErrInvalid)
	}
	return nil
}

// Clone returns an independent copy whose used counts can change separately.
func (c *Cluster) Clone() *Cluster {
	d := *c
	d.ns = append([]Namespace(nil), c.ns...)
	d.inv = append([]float64(nil), c.inv...)
	return &d
}

// Namespaces returns a copy of the namespaces in the order given to NewCluster.
func (c *Cluster) Namespaces() []Namespace { return append([]Namespace(nil), c.ns...) }

// Namespace returns the namespace with the given ID.
func (c *Cluster) Namespace(id string) (Namespace, bool) {
	i, ok := c.index[id]
	if !ok {
		return Namespace{}, false
	}
	return c.ns[i], true
}

// Domain returns the failure domain of a namespace ("host=NAME" or
// "LABEL=VALUE"), or "" for an unknown namespace.
func (c *Cluster) Domain(id string) string {
	i, ok := c.index[id]
	if !ok {
		return ""
	}
	return c.domains[c.domain[i]]
}

// Domains returns the number of distinct failure domains that hold at least
// one namespace in state In.
func (c *Cluster) Domains() int {
	seen := make([]bool, len(c.domains))
	n := 0
	for i, ns := range c.ns {
		if ns.State == StateIn && !seen[c.domain[i]] {
			seen[c.domain[i]] = true
			n++
		}
	}
	return n
}

// Reserve counts one more used slot on each named namespace, as a caller
// does after it allocated a planned segment, so that the next plan sees it.
func (c *Cluster) Reserve(ids ...string) error {
	return c.adjust(ids, 1)
}

// Release counts one less used slot on each named namespace.
func (c *Cluster) Release(ids ...string) error {
	return c.adjust(ids, -1)
}

func (c *Cluster) adjust(ids []string, delta int64) error {
	for k, id := range ids {
		i, ok := c.index[id]
		if !ok || c.ns[i].Used+delta < 0 || c.ns[i].Used+delta > c.ns[i].Capacity {
			_ = c.adjust(ids[:k], -delta) // undo: leave c unchanged on error
			return fmt.Errorf("adjust namespace %q by %d: unknown or out of capacity: %w", id, delta, ErrInvalid)
		}
		c.ns[i].Used += delta
		c.refresh(i)
	}
	return nil
}
