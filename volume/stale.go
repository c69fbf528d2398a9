package volume

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/nvstripe/nvstripe/blockdev"
)

// StaleLog records durably which slots missed writes. A slot whose
// namespace could not take a write (or a flush) holds old data for the
// stripes it missed; the volume knows that in memory, but a later open of
// the volume, after the namespace came back, would read the old data as
// current. So before a write or flush that went around a slot is
// acknowledged, the slot is marked stale here, and an open treats marked
// slots as missing until Repair has rebuilt them (which clears the mark).
// A mark names the slot's location (Ref): one left behind after the slot
// moved elsewhere does not apply to the new location. A mark with Stripes
// names the only stripes the slot missed (a write that failed for lack of
// space, holes.go); MarkStale replaces the slot's mark, so the volume sends
// the whole list each time, and a mark without Stripes (the whole slot)
// wins over one with.
type StaleLog interface {
	MarkStale(ctx context.Context, m StaleSlot) error
	ClearStale(ctx context.Context, m StaleSlot) error
	Stale(ctx context.Context) ([]StaleSlot, error)
}

// StaleSlot is slot Slot of segment Segment, at location Ref. Stripes,
// sorted and disjoint, are the stripes it missed; nil means every stripe.
type StaleSlot struct {
	Segment int64
	Slot    int
	Ref     SlotRef
	Stripes []StripeRange
}

// staleKey is what a StaleSlot is stored under in MemStaleLog.
type staleKey struct {
	Segment int64
	Slot    int
	Ref     SlotRef
}

// MemStaleLog is an in-memory StaleLog (tests; it survives a simulated
// crash of the devices as an etcd-backed one survives a real one).
type MemStaleLog struct {
	mu    sync.Mutex
	marks map[staleKey]StaleSlot
}

var _ StaleLog = (*MemStaleLog)(nil)

// NewMemStaleLog returns an empty in-memory stale log.
func NewMemStaleLog() *MemStaleLog {
	return &MemStaleLog{marks: map[staleKey]StaleSlot{}}
}

func (l *MemStaleLog) MarkStale(_ context.Context, m StaleSlot) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	m.Stripes = slices.Clone(m.Stripes)
	l.marks[staleKey{m.Segment, m.Slot, m.Ref}] = m
	return nil
}

func (l *MemStaleLog) ClearStale(_ context.Context, m StaleSlot) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.marks, staleKey{m.Segment, m.Slot, m.Ref})
	return nil
}

func (l *MemStaleLog) Stale(context.Context) ([]StaleSlot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]StaleSlot, 0, len(l.marks))
	for _, m := range l.marks {
		m.Stripes = slices.Clone(m.Stripes)
		out = append(out, m)
	}
	return out, nil
}

type nopStaleLog struct{}

func (nopStaleLog) MarkStale(context.Context, StaleSlot) error  { return nil }
func (nopStaleLog) ClearStale(context.Context, StaleSlot) error { return nil }
func (nopStaleLog) Stale(context.Context) ([]StaleSlot, error)  { return nil, nil }

// recordStale makes sure copy sl of slot i of s is marked stale in the
// StaleLog before the caller acknowledges an IO that went around it. The
// first caller for a copy writes the mark; the others wait for it.
func (v *Volume) recordStale(ctx context.Context, s *segment, i int, sl *slot) error {
	if sl.logged.Load() {
		return nil
	}
	s.staleMu.Lock()
	defer s.staleMu.Unlock()
	if sl.logged.Load() {
		return nil
	}
	m := StaleSlot{Segment: s.id, Slot: i, Ref: sl.ref}
	if err := v.stale.MarkStale(context.WithoutCancel(ctx), m); err != nil {
		err = fmt.Errorf("segment %d slot %d (namespace %s) missed a write and recording that failed; the write is not acknowledged: %w",
			s.id, i, sl.ref.NS, err)
		return blockdev.Mark(err, blockdev.ErrUnavailable)
	}
	sl.logged.Store(true)
	return nil
}

// missed records, before a write that went around slot i of s at stripe t
// is acknowledged, that each copy of the slot missed that stripe: as a hole
// (the copy's namespace is down or out of space), recorded by stripe, so
// that a short outage of one namespace, or of two in turn, leaves only the
// stripes written meanwhile to rebuild, and the other stripes of the slot
// readable should a third namespace fail too. A copy already stale from
// stripe t on (or as a whole) is recorded so.
func (v *Volume) missed(ctx context.Context, s *segment, i int, t int64) error {
	for _, c := range []*slot{s.slots[i], s.slots[i].prev.Load()} {
		if c == nil {
			continue
		}
		if err := v.missedCopy(ctx, s, i, t, c, c.valid.Load() > t && !c.logged.Load()); err != nil {
			return err
		}
	}
	return nil
}

// missedCopy records that copy c of slot i of s missed stripe t: as a hole
// when hole, else as stale from t on (missedRun).
func (v *Volume) missedCopy(ctx context.Context, s *segment, i int, t int64, c *slot, hole bool) error {
	return v.missedRun(ctx, s, i, t, t, c, hole)
}

// missedRun records that copy c of slot i of s missed stripes [first,
// last]: as holes when hole, else as stale from first on. Holes that could
// not all be made (a concurrent fault lowered the valid mark to last or
// below) fall back to the mark from first on.
func (v *Volume) missedRun(ctx context.Context, s *segment, i int, first, last int64, c *slot, hole bool) error {
	if hole {
		s.addHoles(c, stripeRanges{{From: first, To: last + 1}})
		if err := v.recordHoles(ctx, s, i, c); err != nil {
			return err
		}
		if c.valid.Load() > last {
			return nil
		}
	}
	c.lowerValid(first)
	return v.recordStale(ctx, s, i, c)
}

// stripeBits is a set of stripes of one slot copy, safe for concurrent use.
type stripeBits struct {
	words []atomic.Uint64
}

func newStripeBits(n int64) *stripeBits {
	return &stripeBits{words: make([]atomic.Uint64, (n+63)/64)}
}

func (b *stripeBits) add(t int64) {
	w, m := &b.words[t/64], uint64(1)<<(t%64)
	if w.Load()&m == 0 {
		w.Or(m)
	}
}

// take empties b and returns what it held.
func (b *stripeBits) take() stripeRanges {
	var out stripeRanges
	for i := range b.words {
		if b.words[i].Load() == 0 {
			continue
		}
		x := b.words[i].Swap(0)
		for j := int64(0); x != 0; j, x = j+1, x>>1 {
			if x&1 == 0 {
				continue
			}
			t := int64(i)*64 + j
			if k := len(out) - 1; k >= 0 && out[k].To == t {
				out[k].To++
				continue
			}
			out = append(out, StripeRange{From: t, To: t + 1})
		}
	}
	return out
}

// noteWritten records that stripes [first, last] of copy sl took a write
// that its namespace has not flushed yet: if the namespace goes down before
// a flush, those stripes (and only those) may have lost it (namespaceLost).
// It is called once the write has succeeded.
func (v *Volume) noteWritten(sl *slot, first, last int64) {
	b := sl.written.Load()
	if b == nil {
		b = newStripeBits(v.g.StripesPerSegment())
		if !sl.written.CompareAndSwap(nil, b) {
			b = sl.written.Load()
		}
	}
	for t := first; t <= last; t++ {
		b.add(t)
	}
	// The stripes are added before listed is read, and takeWritten clears
	// listed before it takes them: a stripe it misses lists the copy again.
	if !sl.listed.Load() && sl.listed.CompareAndSwap(false, true) {
		sl.ns.writtenMu.Lock()
		sl.ns.written = append(sl.ns.written, sl)
		sl.ns.writtenMu.Unlock()
	}
	sl.ns.unflushed.Store(true)
}

// writtenStripes maps slot copies to stripes of theirs that took writes.
type writtenStripes map[*slot]stripeRanges

// takeWritten returns the stripes of each copy on ns that took writes since
// the last takeWritten, and forgets them: a flush of ns that began after
// those writes ended makes them durable.
func (ns *nsState) takeWritten() writtenStripes {
	ns.writtenMu.Lock()
	list := ns.written
	ns.written = nil
	ns.writtenMu.Unlock()
	out := make(writtenStripes, len(list))
	for _, sl := range list {
		sl.listed.Store(false)
		if rs := sl.written.Load().take(); len(rs) > 0 {
			out[sl] = rs
		}
	}
	return out
}

// merge adds the stripes of o to w.
func (w writtenStripes) merge(o writtenStripes) {
	for sl, rs := range o {
		w[sl] = unionRanges(w[sl], rs)
	}
}

// unionRanges returns the stripes of a and of b, merged.
func unionRanges(a, b stripeRanges) stripeRanges {
	out := make(stripeRanges, 0, len(a)+len(b))
	out = append(append(out, a...), b...)
	slices.SortFunc(out, func(x, y StripeRange) int { return cmp.Compare(x.From, y.From) })
	return mergeRanges(out, maxHoleRanges)
}

// loadStale reads the stale marks once, before the first segment opens.
// REQUIRES: v.allocMu held.
func (v *Volume) loadStale(ctx context.Context) error {
	if v.staleMarks != nil {
		return nil
	}
	marks, err := v.stale.Stale(ctx)
	if err != nil {
		return fmt.Errorf("reading stale slot marks: %w", err)
	}
	v.staleMarks = map[int64][]StaleSlot{}
	for _, m := range marks {
		v.staleMarks[m.Segment] = append(v.staleMarks[m.Segment], m)
	}
	return nil
}

// openStale opens every segment that has stale marks, so that Repair sees
// them.
func (v *Volume) openStale(ctx context.Context) error {
	v.allocMu.Lock()
	err := v.loadStale(ctx)
	segs := make([]int64, 0, len(v.staleMarks))
	for seg := range v.staleMarks {
		segs = append(segs, seg)
	}
	v.allocMu.Unlock()
	if err != nil {
		return err
	}
	for _, seg := range segs {
		s, err := v.acquire(ctx, seg, false)
		if err != nil {
			return err
		}
		if s != nil {
			s.io.RUnlock()
		}
	}
	return nil
}

// applyStale marks the slots of a just-opened segment that its stale marks
// name as holding nothing valid. Marks for a location the slot no longer
// has are dropped. REQUIRES: v.allocMu held.
func (v *Volume) applyStale(ctx context.Context, s *segment) {
	for _, m := range v.staleMarks[s.id] {
		if m.Slot < 0 || m.Slot >= len(s.slots) || s.slots[m.Slot].ref != m.Ref {
			_ = v.stale.ClearStale(ctx, m) // stale mark of a moved slot; best effort
			continue
		}
		sl := s.slots[m.Slot]
		if m.Stripes != nil && validRanges(m.Stripes, v.g.StripesPerSegment()) {
			holes := stripeRanges(slices.Clone(m.Stripes))
			sl.setHoles(holes)
			sl.recorded.Store(sl.holes.Load())
			continue
		}
		sl.lowerValid(0) // the whole slot, or a list this volume cannot use
		sl.logged.Store(true)
	}
	delete(v.staleMarks, s.id)
}

// clearStale removes the mark of slot i once Repair has made it whole (no
// hole, valid to the end) and what it wrote there is durable
// (slotDurable). A write that
// goes around the slot meanwhile either sees the mark still recorded or
// records it again: logged is cleared before valid is checked, and a writer
// lowers valid before it checks logged; holes change and are recorded
// under staleMu, which this holds.
func (v *Volume) clearStale(ctx context.Context, s *segment, i int) error {
	sl := s.slots[i]
	marked := sl.logged.Load() || sl.recorded.Load() != nil
	if !marked || sl.valid.Load() != v.g.StripesPerSegment() || sl.holes.Load() != nil {
		return nil
	}
	if err := v.slotDurable(ctx, s, i); err != nil {
		return err
	}
	s.staleMu.Lock()
	defer s.staleMu.Unlock()
	whole := sl.logged.Load()
	if !whole && sl.recorded.Load() == nil || sl.holes.Load() != nil {
		return nil // cleared meanwhile, or missed a write for lack of space
	}
	sl.logged.Store(false)
	if sl.valid.Load() != v.g.StripesPerSegment() {
		sl.logged.Store(whole) // missed a write since: the mark stays
		return nil
	}
	if err := v.stale.ClearStale(ctx, StaleSlot{Segment: s.id, Slot: i, Ref: sl.ref}); err != nil {
		sl.logged.Store(whole)
		return fmt.Errorf("segment %d slot %d: clearing its stale mark: %w", s.id, i, err)
	}
	sl.recorded.Store(nil)
	return nil
}

// slotDurable makes what Repair wrote to slot i of s durable, before its
// stale mark is cleared or shrunk: the slot's queued checksum pages are
// written, then its namespace is flushed. The data alone would not do: a
// crash would leave the rebuilt blocks with the checksums of what the slot
// held before, in a slot then trusted as whole, one bad shard more than
// the mark's removal promised. A namespace found down fails it.
func (v *Volume) slotDurable(ctx context.Context, s *segment, i int) error {
	sl := s.slots[i]
	err := v.storeSums(ctx, sl)
	if err == nil && sl.ns.down.Load() { // storeSums marks it so, and drops the pages
		err = fmt.Errorf("writing checksums: namespace %s is down: %w", sl.ref.NS, blockdev.ErrUnavailable)
	}
	if err == nil {
		err = sl.ns.dev.Flush(ctx)
	}
	return v.shardFailed(s, sl, i, 0, err)
}
