package volume

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// Holes: a shard write that fails with blockdev.ErrNoSpace (the storage
// behind the namespace is full) leaves the namespace up and its slot
// readable. Only the one stripe the write missed is stale in that slot
// copy: it becomes a hole, a stripe below the copy's valid mark that the
// copy does not serve. A write that goes around a namespace that is down
// makes a hole too (missed), as does a zeroing of whole stripes that goes
// around one (missedRun), and so does a lost flush for each stripe
// written since the namespace's last one (namespaceLost). Holes are recorded in the StaleLog by stripe
// (StaleSlot.Stripes) before a write that went around them is acknowledged,
// and Repair rebuilds them once the namespace has space again. A write that
// cannot be done within M shards fails with ErrNoSpace and leaves what was
// acknowledged readable (writeNotDone). A resync after an unclean stop
// makes holes too: the stripes it settled without a namespace it could not
// reach (missedSettle).

// StripeRange is the stripes [From, To) of a slot.
type StripeRange struct {
	From, To int64
}

// maxHoleRanges caps the ranges one stale mark lists; beyond it the closest
// ranges are merged (marking some stripes between them stale too), so that
// a mark stays small whatever the pattern of failed writes.
const maxHoleRanges = 1024

// stripeRanges is a sorted list of disjoint, non-adjacent ranges. Values
// are never modified once published: changes make a copy.
type stripeRanges []StripeRange

// has reports whether stripe t is in rs.
func (rs stripeRanges) has(t int64) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].To > t })
	return i < len(rs) && rs[i].From <= t
}

// with returns a copy of rs with stripe t added.
func (rs stripeRanges) with(t int64) stripeRanges {
	if rs.has(t) {
		return rs
	}
	out := make(stripeRanges, 0, len(rs)+1)
	out = append(out, rs...)
	out = append(out, StripeRange{From: t, To: t + 1})
	slices.SortFunc(out, func(a, b StripeRange) int { return cmp.Compare(a.From, b.From) })
	return mergeRanges(out, maxHoleRanges)
}

// without returns a copy of rs with stripe t removed (nil when empty).
func (rs stripeRanges) without(t int64) stripeRanges {
	if !rs.has(t) {
		return rs
	}
	var out stripeRanges
	for _, r := range rs {
		if r.From <= t && t < r.To {
			if r.From < t {
				out = append(out, StripeRange{From: r.From, To: t})
			}
			if t+1 < r.To {
				out = append(out, StripeRange{From: t + 1, To: r.To})
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// mergeRanges joins touching ranges of sorted rs in place and, while more
// than limit remain, the two separated by the smallest gap.
func mergeRanges(rs stripeRanges, limit int) stripeRanges {
	out := rs[:0]
	for _, r := range rs {
		if k := len(out) - 1; k >= 0 && r.From <= out[k].To {
			out[k].To = max(out[k].To, r.To)
			continue
		}
		out = append(out, r)
	}
	for len(out) > limit {
		best := 0
		for i := 1; i+1 < len(out); i++ {
			if out[i+1].From-out[i].To < out[best+1].From-out[best].To {
				best = i
			}
		}
		out[best].To = out[best+1].To
		out = append(out[:best+1], out[best+2:]...)
	}
	return out
}

// validRanges reports whether rs is sorted, disjoint, non-adjacent and
// inside [0, n).
func validRanges(rs []StripeRange, n int64) bool {
	prev := int64(-1)
	for _, r := range rs {
		if r.From <= prev || r.From >= r.To || r.To > n {
			return false
		}
		prev = r.To
	}
	return true
}

func (rs stripeRanges) String() string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%d-%d", r.From, r.To-1)
	}
	return strings.Join(parts, ",")
}

// HasHoles reports whether some slot has stripes it missed for lack of
// space: Repair rebuilds them once their namespace has space again.
func (v *Volume) HasHoles() bool {
	return v.anySlot(func(sl *slot) bool { return sl.holes.Load() != nil })
}

// NeedsRepair reports whether some slot whose namespace is up misses
// stripes: holes (a write went around it, or it ran out of space), or
// stripes it is distrusted from (a read error, a stale mark); Repair
// rebuilds them. A slot being moved is left to the move.
func (v *Volume) NeedsRepair() bool {
	n := v.g.StripesPerSegment()
	return v.anySlot(func(sl *slot) bool {
		return !sl.ns.down.Load() && sl.prev.Load() == nil && (sl.holes.Load() != nil || sl.valid.Load() < n)
	})
}

// anySlot reports whether f holds for some slot of a cached segment.
func (v *Volume) anySlot(f func(*slot) bool) bool {
	for _, s := range v.cachedSegments() {
		s.io.RLock() // a move swaps slots under io held exclusively
		found := !s.freed && slices.ContainsFunc(s.slots, f)
		s.io.RUnlock()
		if found {
			return true
		}
	}
	return false
}

// holesOf returns the holes of copy sl (nil: none).
func (sl *slot) holesOf() stripeRanges {
	if p := sl.holes.Load(); p != nil {
		return *p
	}
	return nil
}

func (sl *slot) setHoles(rs stripeRanges) {
	if len(rs) == 0 {
		sl.holes.Store(nil)
		return
	}
	sl.holes.Store(&rs)
}

// hasHole reports whether copy sl has a hole at stripe t.
func (sl *slot) hasHole(t int64) bool {
	p := sl.holes.Load()
	return p != nil && (*p).has(t)
}

// addHole makes stripe t of copy sl a hole (in memory; recordHoles records
// it). Stripes at or above the valid mark are stale already.
func (s *segment) addHole(sl *slot, t int64) {
	s.staleMu.Lock()
	defer s.staleMu.Unlock()
	if t < sl.valid.Load() && !sl.hasHole(t) {
		sl.setHoles(sl.holesOf().with(t))
	}
}

// addHoles makes the stripes rs of copy sl that are below its valid mark
// holes (in memory; recordHoles records them).
func (s *segment) addHoles(sl *slot, rs stripeRanges) {
	s.staleMu.Lock()
	defer s.staleMu.Unlock()
	valid := sl.valid.Load()
	var below stripeRanges
	for _, r := range rs {
		if r.From < valid {
			below = append(below, StripeRange{From: r.From, To: min(r.To, valid)})
		}
	}
	if len(below) > 0 {
		sl.setHoles(unionRanges(sl.holesOf(), below))
	}
}

// removeHole makes stripe t of copy sl current again (in memory).
func (s *segment) removeHole(sl *slot, t int64) {
	if !sl.hasHole(t) {
		return
	}
	s.staleMu.Lock()
	defer s.staleMu.Unlock()
	sl.setHoles(sl.holesOf().without(t))
}

// recordHoles makes the StaleLog's mark of copy sl of slot i list the
// copy's holes as they are now: before a write that went around a hole is
// acknowledged, and after Repair filled some. A copy marked stale as a
// whole needs nothing more.
func (v *Volume) recordHoles(ctx context.Context, s *segment, i int, sl *slot) error {
	s.staleMu.Lock()
	defer s.staleMu.Unlock()
	cur := sl.holes.Load()
	if sl.logged.Load() || cur == sl.recorded.Load() {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	m := StaleSlot{Segment: s.id, Slot: i, Ref: sl.ref}
	var err error
	if cur == nil {
		err = v.stale.ClearStale(ctx, m)
	} else {
		m.Stripes = *cur
		err = v.stale.MarkStale(ctx, m)
	}
	if err != nil {
		err = fmt.Errorf("segment %d slot %d (namespace %s) missed stripes %v and recording that failed: %w",
			s.id, i, sl.ref.NS, stripeRanges(m.Stripes), err)
		return blockdev.Mark(err, blockdev.ErrUnavailable)
	}
	sl.recorded.Store(cur)
	return nil
}

// fillDataHoles rebuilds, before a write to stripe id changes its parity,
// the data shards of the stripe that are holes: their current data lives
// only in the parity, and a write that then failed half-way (the parity's
// namespace may be short of space too) would lose it. If one cannot be
// rebuilt, the write fails (with ErrNoSpace when space still lacks) having
// changed nothing. REQUIRES: stripe lock held.
func (v *Volume) fillDataHoles(ctx context.Context, s *segment, id layout.StripeID) error {
	for sh := 0; sh < v.g.K; sh++ {
		i := v.g.SlotOf(id.Stripe, sh)
		sl := s.slots[i]
		if !sl.hasHole(id.Stripe) || sl.ns.down.Load() {
			continue
		}
		if err := v.rebuildChunk(ctx, s, i, id); err != nil {
			if sl.ns.down.Load() {
				continue // found unreachable: the write plans without it
			}
			return fmt.Errorf("segment %d stripe %d: write not done: data shard %d (namespace %s) missed an earlier write and cannot be rebuilt: %w",
				id.Segment, id.Stripe, sh, sl.ref.NS, err)
		}
		s.removeHole(sl, id.Stripe)
	}
	return nil
}

// writeNotDone ends a stripe write that cannot be done within M shards
// (usable says which shards can take it now; before, which could when it
// started). When shards ran out of space during the write, it fails with
// ErrNoSpace and keeps what was acknowledged readable: each data shard
// holds, for the stripe, its old data outside the write's range and old
// data, new data or a mix inside it, all of which a failed write may
// leave; the parity may match neither. So the holes this write made in data
// shards are filled again (their content counts as current) and every
// parity shard becomes a hole instead, recorded first, until Repair
// re-encodes it. A data shard that was already missing when the write
// started is lost for this stripe (its reads fail): the write went past M.
// Without lack of space it is the StripeError of old.
func (v *Volume) writeNotDone(ctx context.Context, s *segment, id layout.StripeID, before, usable []bool) error {
	var made []int // data shards this write made holes in
	noSpace := false
	for sh := range usable {
		i := v.g.SlotOf(id.Stripe, sh)
		if before[sh] && !usable[sh] && s.slots[i].hasHole(id.Stripe) && !s.slots[i].ns.down.Load() {
			noSpace = true
			if sh < v.g.K {
				made = append(made, sh)
			}
		}
	}
	if !noSpace {
		return v.stripeError(s, id, usable)
	}
	for sh := v.g.K; sh < v.g.N(); sh++ {
		i := v.g.SlotOf(id.Stripe, sh)
		for _, c := range []*slot{s.slots[i], s.slots[i].prev.Load()} {
			if c == nil {
				continue
			}
			s.addHole(c, id.Stripe)
			if err := v.recordHoles(ctx, s, i, c); err != nil {
				return err
			}
		}
	}
	for _, sh := range made {
		i := v.g.SlotOf(id.Stripe, sh)
		for _, c := range []*slot{s.slots[i], s.slots[i].prev.Load()} {
			if c != nil && c.hasHole(id.Stripe) {
				s.removeHole(c, id.Stripe)
				if err := v.recordHoles(ctx, s, i, c); err != nil {
					return err
				}
			}
		}
	}
	var missing []string
	for sh, u := range usable {
		if !u {
			missing = append(missing, s.slots[v.g.SlotOf(id.Stripe, sh)].ref.NS)
		}
	}
	return fmt.Errorf("segment %d stripe %d: write not done: %d of %d shards out of space or missing (namespaces %s), at most %d tolerated; free space on their storage: %w",
		id.Segment, id.Stripe, len(missing), v.g.N(), strings.Join(missing, ", "), v.g.M, blockdev.ErrNoSpace)
}
