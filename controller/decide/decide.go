package decide

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nvstripe/nvstripe/placement"
)

// Decide returns the Actions to take at now. It is pure: the same State,
// now and Config give the same Actions, whatever the order of State's
// slices. It fails with ErrInvalid on malformed State (unknown volume,
// wrong shard count, duplicate IDs, a host or namespace placement rejects).
//
// Rules, in order:
//  1. MarkOut each down namespace down since OutAfter or longer; for the
//     rest of the call it counts as out.
//  2. AbortMove a move not yet committed whose destination is gone
//     (unknown, out or failed) or that stalled (no progress for
//     StallAfter), and a drain or
//     rebalance move in a segment that lost a shard (its rebuild comes
//     first). A down destination is waited for, like a down source.
//     A rebuild whose lost namespace comes back goes on: the returning copy
//     missed the writes made while it was away, so it is stale, while the
//     new slot took every write during the rebuild. Aborting would also let
//     a flapping host start and abort rebuilds in a loop. The returned slot
//     is freed when the rebuild commits.
//  3. Repairs, one shard per segment without a move in flight (a segment
//     with two lost shards gets its second rebuild after the first commits):
//     a. RebuildShard for the lowest shard on an out, failed or unknown
//     namespace. Segments with the least redundancy left go first
//     (remaining = m - shards on down, out, failed or unknown namespaces).
//     b. Then MoveShard (drain) for the lowest shard on a draining namespace
//     (or a drained one: a slot allocated as it was marked drained).
//     c. Shards on down namespaces get nothing: down is the wait before out.
//     d. MarkDrained each draining namespace that holds no slot and has no
//     move in flight.
//  4. Rebalance, for the first rebalance task by ID, only when no repair is
//     pending or in flight: MoveShard (rebalance) for placement's plan;
//     FinishTask once the plan is empty and none of its moves is in flight.
//
// Caps: a new move is emitted only while fewer than MaxMoves are in flight
// in all, and while its destination and (for a copy) its source have fewer
// than MaxMovesPerNS in flight. Placement is asked with capped namespaces
// left out, so work spreads; a shard that finds no home only because of
// caps waits for the next call instead of being reported Blocked.
//
// Invariants of the result (checked by the tests):
//
//	I1. At most one new move (RebuildShard or MoveShard) per segment, and
//	    none for a segment that has a move in flight or aborted in this call.
//	I2. A new move's destination is in service, holds no other shard of the
//	    segment, and shares no failure domain with the segment's other
//	    shards (down ones included) while enough domains exist.
//	I3. The caps hold, counting moves in flight.
func Decide(st State, now time.Time, cfg Config) ([]Action, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d, err := newDecider(st, now, cfg)
	if err != nil {
		return nil, err
	}
	d.markOut(st.Namespaces)
	d.abortMoves()
	d.countMoves()
	pending := d.repair()
	d.markDrained()
	d.rebalance(st.Tasks, pending)
	return d.out, nil
}

// decider is Decide's working state for one call.
type decider struct {
	cfg    Config
	now    time.Time
	hosts  []placement.Host
	ns     []placement.Namespace // sorted by ID; states and used counts change as actions are planned
	nsIdx  map[string]int
	vols   map[string]Volume
	segs   []Segment // sorted by ID
	busy   map[SegmentID]bool
	moves  map[string]int // moves in flight per namespace
	active int            // moves in flight in all
	capped *placement.Cluster
	out    []Action
}

func newDecider(st State, now time.Time, cfg Config) (*decider, error) {
	d := &decider{cfg: cfg, now: now, nsIdx: map[string]int{}, vols: map[string]Volume{},
		busy: map[SegmentID]bool{}, moves: map[string]int{}}
	d.hosts = slices.Clone(st.Hosts)
	slices.SortFunc(d.hosts, func(a, b placement.Host) int { return cmp.Compare(a.Name, b.Name) })
	for _, n := range st.Namespaces {
		d.ns = append(d.ns, n.Placement())
	}
	slices.SortFunc(d.ns, func(a, b placement.Namespace) int { return cmp.Compare(a.ID, b.ID) })
	for i, n := range d.ns {
		d.nsIdx[n.ID] = i
	}
	if _, err := d.cluster(false); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := d.loadVolumes(st.Volumes); err != nil {
		return nil, err
	}
	d.segs = slices.Clone(st.Segments)
	slices.SortFunc(d.segs, func(a, b Segment) int { return a.ID.Compare(b.ID) })
	if err := d.checkSegments(); err != nil {
		return nil, err
	}
	return d, checkTasks(st.Tasks)
}

func (d *decider) loadVolumes(vols []Volume) error {
	for _, v := range vols {
		if _, dup := d.vols[v.ID]; dup || v.ID == "" || v.K < 1 || v.M < 0 {
			return fmt.Errorf("volume %q (k=%d m=%d): empty, duplicate or bad layout: %w", v.ID, v.K, v.M, ErrInvalid)
		}
		d.vols[v.ID] = v
	}
	return nil
}

func (d *decider) checkSegments() error {
	for i, s := range d.segs {
		v, ok := d.vols[s.ID.Volume]
		switch {
		case !ok:
			return fmt.Errorf("segment %v: unknown volume: %w", s.ID, ErrInvalid)
		case len(s.Slots) != v.K+v.M:
			return fmt.Errorf("segment %v: %d slots, volume has k+m=%d: %w", s.ID, len(s.Slots), v.K+v.M, ErrInvalid)
		case i > 0 && d.segs[i-1].ID == s.ID:
			return fmt.Errorf("duplicate segment %v: %w", s.ID, ErrInvalid)
		case s.Move != nil && (s.Move.Shard < 0 || s.Move.Shard >= len(s.Slots) || s.Move.Kind > MoveRebalance):
			return fmt.Errorf("segment %v: move of shard %d (%v): %w", s.ID, s.Move.Shard, s.Move.Kind, ErrInvalid)
		}
	}
	return nil
}

func checkTasks(tasks []Task) error {
	seen := map[string]bool{}
	for _, t := range tasks {
		if t.ID == "" || seen[t.ID] || t.Kind != TaskRebalance || !(t.Threshold >= 0) {
			return fmt.Errorf("task %q (kind %d, threshold %g): empty, duplicate or bad: %w", t.ID, t.Kind, t.Threshold, ErrInvalid)
		}
		seen[t.ID] = true
	}
	return nil
}

// state returns the working state of namespace id; ok is false for an
// unknown namespace.
func (d *decider) state(id string) (placement.State, bool) {
	i, ok := d.nsIdx[id]
	if !ok {
		return 0, false
	}
	return d.ns[i].State, true
}

// lost reports whether a shard on namespace id is gone for good.
func (d *decider) lost(id string) bool {
	s, ok := d.state(id)
	return !ok || s == placement.StateOut || s == placement.StateFailed
}

// markOut applies rule 1.
func (d *decider) markOut(nss []Namespace) {
	since := map[string]time.Time{}
	for _, n := range nss {
		since[n.ID] = n.Since
	}
	var due []int
	for i, n := range d.ns {
		t := since[n.ID]
		if n.State == placement.StateDown && !t.IsZero() && d.now.Sub(t) >= d.cfg.OutAfter {
			due = append(due, i)
		}
	}
	if len(due) == 0 {
		return
	}
	if up, hosts := d.hostsUp(); float64(up) < d.cfg.MinUpFraction*float64(hosts) {
		h := HoldOut{Up: up, Hosts: hosts}
		for _, i := range due {
			h.Due = append(h.Due, d.ns[i].ID)
		}
		d.out = append(d.out, h)
		return
	}
	for _, i := range due {
		d.out = append(d.out, MarkOut{NS: d.ns[i].ID, DownSince: since[d.ns[i].ID]})
		d.ns[i].State = placement.StateOut
	}
}

// markDrained applies rule 3d.
func (d *decider) markDrained() {
	for _, n := range d.ns {
		if n.State == placement.StateDraining && n.Used == 0 && d.moves[n.ID] == 0 {
			d.out = append(d.out, MarkDrained{NS: n.ID})
		}
	}
}

// hostsUp counts the hosts with a namespace in service (in, draining or
// down), and those of them with one that is up (in or draining).
func (d *decider) hostsUp() (up, hosts int) {
	seen := map[string]bool{} // host -> up
	for _, n := range d.ns {
		switch n.State {
		case placement.StateIn, placement.StateDraining:
			seen[n.Host] = true
		case placement.StateDown:
			if _, ok := seen[n.Host]; !ok {
				seen[n.Host] = false
			}
		}
	}
	for _, u := range seen {
		hosts++
		if u {
			up++
		}
	}
	return up, hosts
}

// abortMoves applies rule 2.
func (d *decider) abortMoves() {
	for i := range d.segs {
		s := &d.segs[i]
		if s.Move == nil {
			continue
		}
		d.busy[s.ID] = true
		if why := d.abortReason(s); why != "" {
			d.out = append(d.out, AbortMove{Segment: s.ID, Shard: s.Move.Shard, To: s.Move.To.NS, Reason: why})
			s.Move = nil
		}
	}
}

func (d *decider) abortReason(s *Segment) string {
	m := s.Move
	if m.Committed {
		return "" // done but for the old slot's release: nothing to undo
	}
	if st, ok := d.state(m.To.NS); !ok || st == placement.StateOut || st == placement.StateFailed {
		return "destination " + stateName(st, ok)
	}
	last := m.Started
	if m.Updated.After(last) {
		last = m.Updated
	}
	if d.cfg.StallAfter > 0 && d.now.Sub(last) >= d.cfg.StallAfter {
		return fmt.Sprintf("stalled: no progress since %s", last.Format(time.RFC3339))
	}
	if m.Kind != MoveRebuild && slices.ContainsFunc(s.Slots, func(sl Slot) bool { return d.lost(sl.NS) }) {
		return "segment lost a shard: rebuild first"
	}
	return ""
}

func stateName(s placement.State, known bool) string {
	if !known {
		return "unknown"
	}
	return s.String()
}

// countMoves counts the moves still in flight against the caps. A
// committed move copies nothing more (it waits for readers to follow
// before its old slot is released): it takes no share of the caps.
func (d *decider) countMoves() {
	for _, s := range d.segs {
		if m := s.Move; m != nil && !m.Committed {
			d.addMove(s.Slots[m.Shard].NS, m.Kind != MoveRebuild, m.To.NS)
		}
	}
}

// addMove counts one move writing to to and, for a copy, reading from.
func (d *decider) addMove(from string, copyFrom bool, to string) {
	d.active++
	d.bump(to)
	if copyFrom {
		d.bump(from)
	}
}

func (d *decider) bump(id string) {
	d.moves[id]++
	if d.moves[id] == d.cfg.MaxMovesPerNS {
		d.capped = nil // a namespace reached its cap: rebuild the capped view
	}
}

// room reports whether one more move may start, reading from from when
// copyFrom.
func (d *decider) room(from string, copyFrom bool) bool {
	return d.active < d.cfg.MaxMoves && (!copyFrom || d.moves[from] < d.cfg.MaxMovesPerNS)
}

// reserve counts a planned destination slot on namespace id.
func (d *decider) reserve(id string) {
	d.ns[d.nsIdx[id]].Used++
	d.capped = nil
}

// cluster returns the working namespaces as a placement.Cluster; with
// capped set, namespaces at their move cap are left out (shown draining).
func (d *decider) cluster(capped bool) (*placement.Cluster, error) {
	if capped && d.capped != nil {
		return d.capped, nil
	}
	nss := slices.Clone(d.ns)
	for i, n := range nss {
		if capped && n.State == placement.StateIn && d.moves[n.ID] >= d.cfg.MaxMovesPerNS {
			nss[i].State = placement.StateDraining
		}
	}
	c, err := placement.NewCluster(d.hosts, nss, d.cfg.DomainLabel)
	if capped && err == nil {
		d.capped = c
	}
	return c, err
}

// anyCapped reports whether some namespace in service is at its cap.
func (d *decider) anyCapped() bool {
	for _, n := range d.ns {
		if n.State == placement.StateIn && d.moves[n.ID] >= d.cfg.MaxMovesPerNS {
			return true
		}
	}
	return false
}

// errCapped is returned by place when caps, not placement, stand in the way.
var errCapped = errors.New("capped")
