package health

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// HostState is a tracked host's health as Tracker reports it. Namespaces
// follow their host, except that a failed namespace stays failed.
type HostState uint8

// Host and namespace states.
const (
	StateUnknown HostState = iota // not yet reported (a host just learned of)
	StateUp                       // alive: its namespaces are in service
	StateDown                     // silent past the grace period: degraded, no rebuild yet
	StateOut                      // down past OutAfter: its shards are rebuilt elsewhere
	StateFailed                   // a namespace with an owner-reported IO error
)

// String returns unknown, up, down, out or failed.
func (s HostState) String() string {
	switch s {
	case StateUnknown:
		return "unknown"
	case StateUp:
		return "up"
	case StateDown:
		return "down"
	case StateOut:
		return "out"
	case StateFailed:
		return "failed"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// TrackerConfig tunes a Tracker. Zero fields take their defaults.
type TrackerConfig struct {
	// Grace is how long a host must be silent (StatusDead in gossip)
	// before it is down. Default 5s.
	Grace time.Duration
	// OutAfter is how long a host stays down before it is out. Default 10m
	// (`nvstripe controller --out-after`).
	OutAfter time.Duration
	// FlapLimit silences within FlapWindow make a host flapping. Default 3.
	FlapLimit int
	// FlapWindow is the window FlapLimit counts in. Default 10m.
	FlapWindow time.Duration
	// StableFor is how long a flapping host must stay alive before it is
	// reported up again. Default 2m.
	StableFor time.Duration
}

// EnsureDefaults fills zero fields with their defaults.
func (c *TrackerConfig) EnsureDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Grace, 5*time.Second)
	def(&c.OutAfter, 10*time.Minute)
	def(&c.FlapWindow, 10*time.Minute)
	def(&c.StableFor, 2*time.Minute)
	if c.FlapLimit == 0 {
		c.FlapLimit = 3
	}
}

// Validate reports negative fields with ErrInvalid.
func (c *TrackerConfig) Validate() error {
	if c.Grace < 0 || c.OutAfter < 0 || c.FlapWindow < 0 || c.StableFor < 0 || c.FlapLimit < 0 {
		return fmt.Errorf("tracker config %+v: negative field: %w", *c, ErrInvalid)
	}
	return nil
}

// Transition is one reported change. For a host it lists the namespaces
// the host serves that are not failed; for a failed namespace, Namespaces
// holds just that namespace and To is StateFailed.
type Transition struct {
	Node       string // member name
	Host       string // Meta.Host
	Namespaces []string
	From, To   HostState
	At         time.Time // when the change took effect (may be before the Tick)
}

func (t Transition) String() string {
	return fmt.Sprintf("%s %s -> %s %v", t.Node, t.From, t.To, t.Namespaces)
}

// Tracker turns membership events and IO error reports into state
// transitions. Time is always an argument; Tracker reads no clock.
//
// The rules, per member (a "host"):
//  1. A new member starts unknown; Tick reports it up once alive, or down
//     once silent for Grace.
//  2. Up -> down when silent (StatusDead) for Grace;
//     StatusSuspect changes nothing (gossip's own suspicion already delays
//     dead).
//  3. Down -> out after OutAfter, counted from the moment it went down.
//  4. Down or out -> up as soon as it is alive again, unless it flaps.
//  5. Flapping: every alive -> silent change is a silence; a host with
//     FlapLimit silences within the last FlapWindow when it comes back is
//     flapping, and is reported up only after StableFor alive without a
//     new silence. While held, it stays down (its out clock keeps running
//     from the first down, so it does go out) or out (so a rebuild that
//     started goes on): a flapping host moves through down -> out -> up
//     once, never in a loop.
//  6. ReportIOError marks a namespace failed at once (the next Tick) and it
//     stays failed, whatever its host does, until ClearFailed.
//
// Transitions do not depend on when Tick is called: each Observe first
// settles what was due before its event, so a late Tick reports the same
// transitions with the same At times as timely ones would. Call Tick after
// each batch of Observe calls and periodically (every second) to learn of
// them promptly.
type Tracker struct {
	cfg     TrackerConfig
	hosts   map[string]*tracked
	failed  map[string]bool
	pending []Transition
}

// tracked is the Tracker's record of one member.
type tracked struct {
	host       string
	namespaces []string
	state      HostState   // last reported
	alive      bool        // last observed
	since      time.Time   // when alive last changed (or first seen)
	upAt       time.Time   // when alive: the earliest it may be reported up
	downAt     time.Time   // when state is down or out: when it went down
	silences   []time.Time // alive -> silent changes within FlapWindow
}

// NewTracker returns an empty Tracker; cfg is completed with defaults.
func NewTracker(cfg TrackerConfig) (*Tracker, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Tracker{cfg: cfg, hosts: map[string]*tracked{}, failed: map[string]bool{}}, nil
}

// Observe records a membership event that happened at now. The member's
// Meta, when set, replaces what is known of its host and namespaces (a
// controller seeds hosts it expects from metadata by observing them as
// StatusDead: they go down after Grace unless gossip says they are alive).
func (t *Tracker) Observe(m Member, now time.Time) {
	h := t.hosts[m.Name]
	if h == nil {
		h = &tracked{since: now, upAt: now}
		t.hosts[m.Name] = h
		if m.Status == StatusSuspect {
			m.Status = StatusAlive // a suspect is a member that was alive
		}
	}
	t.advance(m.Name, h, now) // what was due before this event happened
	if m.Meta.Role != 0 {
		h.host, h.namespaces = m.Meta.Host, slices.Clone(m.Meta.Namespaces)
	}
	switch m.Status {
	case StatusAlive:
		if !h.alive {
			h.alive, h.since, h.upAt = true, now, now
			if h.flapping(now, t.cfg) {
				h.upAt = now.Add(t.cfg.StableFor)
			}
		}
	case StatusDead:
		if h.alive {
			h.alive, h.since = false, now
			h.silences = append(h.recent(now, t.cfg), now)
		}
	}
}

// recent returns the silences within FlapWindow before now.
func (h *tracked) recent(now time.Time, cfg TrackerConfig) []time.Time {
	i := sort.Search(len(h.silences), func(i int) bool { return now.Sub(h.silences[i]) < cfg.FlapWindow })
	return h.silences[i:]
}

func (h *tracked) flapping(now time.Time, cfg TrackerConfig) bool {
	return len(h.recent(now, cfg)) >= cfg.FlapLimit
}

// ReportIOError marks namespace ns failed at now (an owner saw IO errors).
// A namespace already failed is not reported again.
func (t *Tracker) ReportIOError(ns string, now time.Time) {
	if t.failed[ns] {
		return
	}
	t.settle(now)
	t.failed[ns] = true
	tr := Transition{Namespaces: []string{ns}, To: StateFailed, At: now}
	for _, name := range t.names() {
		if h := t.hosts[name]; slices.Contains(h.namespaces, ns) {
			tr.Node, tr.Host, tr.From = name, h.host, h.state
			break
		}
	}
	t.pending = append(t.pending, tr)
}

// ClearFailed forgets, at now, that ns failed (an operator put it back in
// service); its host's later transitions list it again.
func (t *Tracker) ClearFailed(ns string, now time.Time) {
	t.settle(now)
	delete(t.failed, ns)
}

// Forget drops a member (removed from the cluster).
func (t *Tracker) Forget(name string) { delete(t.hosts, name) }

// State returns the last reported state of a member.
func (t *Tracker) State(name string) (HostState, bool) {
	h, ok := t.hosts[name]
	if !ok {
		return StateUnknown, false
	}
	return h.state, true
}

// Flapping reports whether a member counts as flapping at now.
func (t *Tracker) Flapping(name string, now time.Time) bool {
	h, ok := t.hosts[name]
	return ok && h.flapping(now, t.cfg)
}

// Tick returns the transitions due at or before now that were not yet
// returned, sorted by At, then Node (ties of one node in the order they
// happened).
func (t *Tracker) Tick(now time.Time) []Transition {
	t.settle(now)
	out := t.pending
	t.pending = nil
	slices.SortStableFunc(out, func(a, b Transition) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Node, b.Node)
	})
	return out
}

// settle queues every transition due at or before now.
func (t *Tracker) settle(now time.Time) {
	for _, name := range t.names() {
		t.advance(name, t.hosts[name], now)
	}
}

// advance queues h's transitions due at or before now.
func (t *Tracker) advance(name string, h *tracked, now time.Time) {
	for {
		to, at, ok := h.next(t.cfg)
		if !ok || at.After(now) {
			return
		}
		t.pending = append(t.pending, Transition{Node: name, Host: h.host, Namespaces: t.serving(h),
			From: h.state, To: to, At: at})
		if to == StateDown {
			h.downAt = at
		}
		h.state = to
	}
}

// next returns the member's next transition and when it is due.
func (h *tracked) next(cfg TrackerConfig) (HostState, time.Time, bool) {
	switch {
	case h.alive && h.state != StateUp && h.state != StateDown:
		return StateUp, h.upAt, true // unknown or out
	case !h.alive && (h.state == StateUp || h.state == StateUnknown):
		return StateDown, h.since.Add(cfg.Grace), true
	case h.state == StateDown:
		out := h.downAt.Add(cfg.OutAfter)
		if h.alive && !h.upAt.After(out) {
			return StateUp, h.upAt, true
		}
		return StateOut, out, true
	}
	return 0, time.Time{}, false
}

// serving returns h's namespaces that are not failed.
func (t *Tracker) serving(h *tracked) []string {
	var out []string
	for _, ns := range h.namespaces {
		if !t.failed[ns] {
			out = append(out, ns)
		}
	}
	return out
}

func (t *Tracker) names() []string {
	names := make([]string, 0, len(t.hosts))
	for n := range t.hosts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
