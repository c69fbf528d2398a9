package volume

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/nvstripe/nvstripe/blockdev"
)

// nsState is what the volume knows about one namespace.
type nsState struct {
	id        string
	dev       blockdev.Device
	down      atomic.Bool // IO failed with ErrUnavailable; cleared by SetNamespaceUp
	unflushed atomic.Bool // a write succeeded since the last flush
	// leftBehind counts the reads of it that hedged reads left behind
	// and that are still in flight (hedge.go): while there are any, a
	// hedged read reads another shard instead, if it has one.
	leftBehind atomic.Int32

	writtenMu sync.Mutex
	written   []*slot // copies on it that took writes since its last flush began (noteWritten)
}

// slot is one shard slot of a segment.
//
// Invariant: stripes [0, valid) of the slot hold current data, except its
// holes (stripes a write missed, see holes.go); stripes
// at or above valid are stale (missed a write, or not filled yet) and are
// not read.
// valid is StripesPerSegment for a healthy slot. It grows only by fill, which
// holds the stripe's lock; it shrinks when a write has to skip the slot.
//
// During a move or rebuild the segment's slot is the new location and prev the
// old one: prev serves the stripes at or above valid and receives every write,
// so it stays current and the move can be abandoned at any point.
type slot struct {
	ref   SlotRef
	ns    *nsState
	dev   blockdev.Device // window over the slot
	valid atomic.Int64
	prev  atomic.Pointer[slot]
	// logged: this copy is marked in the StaleLog as a whole (see
	// recordStale).
	logged atomic.Bool
	sums   sumTable // the checksums of the copy's blocks (Geometry.Checksums)
	ring   logRing  // the copy's write-log area (Geometry.Log)

	// holes: stripes below valid that this copy missed (holes.go); nil
	// when none. recorded: the holes its StaleLog mark
	// lists (nil: no mark by stripe). Both change under staleMu.
	holes, recorded atomic.Pointer[stripeRanges]

	// written: the stripes of this copy that took writes since its
	// namespace's last flush began (nil until the first); listed: the copy
	// is in its namespace's written list. See noteWritten.
	written atomic.Pointer[stripeBits]
	listed  atomic.Bool
}

func (sl *slot) serves(t int64) bool {
	return !sl.ns.down.Load() && sl.valid.Load() > t && !sl.hasHole(t)
}

// segment is an allocated segment with its slots.
type segment struct {
	id    int64
	slots []*slot

	// io is held shared by every IO on the segment and exclusively to free it.
	io    sync.RWMutex
	freed bool // REQUIRES: io held to read, io held exclusively to write

	staleMu sync.Mutex // serialises StaleLog updates of the segment's slots

	proven rowBits // rows whose shards this owner saw agree (prove.go)

	dirtyMu  sync.Mutex
	dirty    bool  // marked dirty in the DirtyLog
	inflight int   // writes in progress
	gen      int64 // writes finished
}

// readSlot returns the copy of slot i that serves stripe t, or nil.
func (s *segment) readSlot(i int, t int64) *slot {
	sl := s.slots[i]
	if sl.serves(t) {
		return sl
	}
	if p := sl.prev.Load(); p != nil && p.serves(t) {
		return p
	}
	return nil
}

// writeSlots returns the copies of slot i that must receive a write of
// stripe t: the slot when it serves t, and the old location during a move.
func (s *segment) writeSlots(i int, t int64) []*slot { return s.appendWriteSlots(nil, i, t) }

// appendWriteSlots appends writeSlots(i, t) to out: a caller with an array
// of two on its stack allocates nothing.
func (s *segment) appendWriteSlots(out []*slot, i int, t int64) []*slot {
	if sl := s.slots[i]; sl.serves(t) {
		out = append(out, sl)
	}
	if p := s.slots[i].prev.Load(); p != nil && p.serves(t) {
		out = append(out, p)
	}
	return out
}

// usable reports whether slot i can serve stripe t.
func (s *segment) usable(i int, t int64) bool { return s.readSlot(i, t) != nil }

// lowerValid marks stripe t and above of slot i (and of its old location
// during a move) stale.
func (s *segment) lowerValid(i int, t int64) {
	s.slots[i].lowerValid(t)
	if p := s.slots[i].prev.Load(); p != nil {
		p.lowerValid(t)
	}
}

func (sl *slot) lowerValid(t int64) {
	for {
		cur := sl.valid.Load()
		if cur <= t || sl.valid.CompareAndSwap(cur, t) {
			return
		}
	}
}

// acquire returns segment seg with its io lock held shared (release with
// s.io.RUnlock), or nil for an unallocated segment when alloc is false.
func (v *Volume) acquire(ctx context.Context, seg int64, alloc bool) (*segment, error) {
	for {
		s, err := v.segmentFor(ctx, seg, alloc)
		if err != nil || s == nil {
			return nil, err
		}
		s.io.RLock()
		if !s.freed {
			return s, nil
		}
		s.io.RUnlock()
	}
}

// segmentFor returns the cached segment seg, looking it up (and allocating it
// when alloc is true) on a miss. It returns nil, nil for an unallocated
// segment when alloc is false. One caller at a time opens a given segment
// (it claims it in v.opening); others wait for it, or for their ctx. No lock
// of the volume is held while the segment's namespaces are resolved, so a
// namespace that is slow to connect holds up only the IO that needs it.
func (v *Volume) segmentFor(ctx context.Context, seg int64, alloc bool) (*segment, error) {
	v.mu.Lock()
	s, ok := v.segs[seg]
	v.mu.Unlock()
	if ok && (s != nil || !alloc) {
		return s, nil
	}
	return v.openOrWait(ctx, seg, alloc)
}

// openOrWait is segmentFor on a cache miss: it opens the segment, or waits
// for the caller that is opening it.
func (v *Volume) openOrWait(ctx context.Context, seg int64, alloc bool) (*segment, error) {
	for {
		v.mu.Lock()
		s, ok := v.segs[seg]
		if ok && (s != nil || !alloc) {
			v.mu.Unlock()
			return s, nil
		}
		wait := v.opening[seg]
		if wait == nil {
			done := make(chan struct{})
			v.opening[seg] = done
			v.mu.Unlock()
			s, err := v.loadSegment(ctx, seg, alloc)
			v.mu.Lock()
			if err == nil {
				v.segs[seg] = s
			}
			delete(v.opening, seg)
			v.mu.Unlock()
			close(done)
			return s, err
		}
		v.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("segment %d: waiting for its lookup: %w", seg, ctx.Err())
		}
	}
}

// loadSegment looks segment seg up (allocating it when alloc is true) and
// opens it, or returns nil, nil for an unallocated segment when alloc is
// false. REQUIRES: seg claimed in v.opening by the caller.
func (v *Volume) loadSegment(ctx context.Context, seg int64, alloc bool) (*segment, error) {
	refs, found, fresh, err := v.placeSegment(ctx, seg, alloc)
	if err != nil || !found {
		return nil, err
	}
	s, err := v.openSegment(ctx, seg, refs, fresh)
	if err != nil {
		return nil, err
	}
	v.allocMu.Lock()
	v.applyStale(ctx, s)
	v.allocMu.Unlock()
	return s, nil
}

// placeSegment returns the slots of segment seg from the Allocator,
// allocating them when alloc is true (fresh), and reads the stale marks
// once, before the first segment opens.
func (v *Volume) placeSegment(ctx context.Context, seg int64, alloc bool) (refs []SlotRef, found, fresh bool, err error) {
	v.allocMu.Lock()
	defer v.allocMu.Unlock()
	refs, found, err = v.alloc.Lookup(ctx, seg)
	if err != nil {
		return nil, false, false, fmt.Errorf("segment %d: lookup: %w", seg, err)
	}
	if !found && alloc {
		if err := v.markAllocating(ctx, seg); err != nil {
			return nil, false, false, err
		}
		if refs, err = v.alloc.Allocate(ctx, seg); err != nil {
			return nil, false, false, fmt.Errorf("segment %d: allocate: %w", seg, err)
		}
		found, fresh = true, true
	}
	if found {
		err = v.loadStale(ctx)
	}
	return refs, found, fresh, err
}

// markAllocating marks segment seg dirty before it is allocated, in format
// 4: until its slots' checksum areas are written (initSums), its blocks
// fail their checks, and a crash in between must leave it for Recover
// (whose resync writes them: a row of zeros with blank blocks is a
// never-written one, blankRow). Formats 2 and 3 need no mark: a trimmed
// slot reads as zeros.
func (v *Volume) markAllocating(ctx context.Context, seg int64) error {
	if v.g.Seed == 0 {
		return nil
	}
	if err := v.dirty.MarkDirty(ctx, seg); err != nil {
		return fmt.Errorf("segment %d: marking dirty before allocation: %w", seg, err)
	}
	return nil
}

// openSegment builds the slots of a segment. A freshly allocated segment's
// slots are trimmed, durably, so that unwritten parts read as zeros (in
// format 4 their checksum areas are then written with zero blocks'
// checksums before the flush: clearSlot).
func (v *Volume) openSegment(ctx context.Context, seg int64, refs []SlotRef, fresh bool) (*segment, error) {
	if len(refs) != v.g.N() {
		return nil, fmt.Errorf("segment %d: placement has %d slots, layout needs %d", seg, len(refs), v.g.N())
	}
	s := &segment{id: seg, slots: make([]*slot, len(refs)), proven: newRowBits(v.g.StripesPerSegment() * v.g.BlocksPerChunk())}
	s.dirty = fresh && v.g.Seed != 0 // markAllocating
	for i, r := range refs {
		sl, err := v.openSlot(ctx, r, seg, i)
		if err != nil {
			return nil, fmt.Errorf("segment %d slot %d: %w", seg, i, err)
		}
		s.slots[i] = sl
		sl.sums.fresh = fresh
	}
	if fresh {
		if err := v.each(len(s.slots), func(i int) error { return v.clearSlot(ctx, s, i) }); err != nil {
			return nil, fmt.Errorf("segment %d: clearing new slots: %w", seg, err)
		}
		s.proven.set(0, v.g.StripesPerSegment()*v.g.BlocksPerChunk()) // zeros everywhere agree
	}
	return s, nil
}

// clearSlot trims slot i of a freshly allocated segment and, in format 4,
// writes its checksum area and flushes it: a crash must not leave data
// written after it on a blank checksum area. A slot that cannot take it is
// marked stale (Repair rebuilds it, as zeros).
func (v *Volume) clearSlot(ctx context.Context, s *segment, i int) error {
	sl := s.slots[i]
	sl.ns.unflushed.Store(true)
	err := sl.dev.Trim(ctx, 0, v.g.SlotSize)
	if err == nil && v.g.Seed != 0 {
		err = v.initSums(ctx, sl)
	}
	if err == nil {
		// Durable before the first write: a crash must not bring back
		// what the slot held before (a slot a move left behind is
		// released as it was).
		err = sl.ns.dev.Flush(ctx)
	}
	if isShardFault(v.shardFailed(s, sl, i, 0, err)) {
		s.lowerValid(i, 0)
		return v.recordStale(ctx, s, i, sl)
	}
	return err
}

// openSlot opens slot r as slot i of segment seg.
func (v *Volume) openSlot(ctx context.Context, r SlotRef, seg int64, i int) (*slot, error) {
	ns, err := v.namespace(ctx, r.NS)
	if err != nil {
		return nil, err
	}
	w, err := blockdev.NewWindow(ns.dev, r.Slot*v.g.SlotSize, v.g.SlotSize)
	if err != nil {
		return nil, fmt.Errorf("namespace %s slot %d: %w", r.NS, r.Slot, err)
	}
	sl := &slot{ref: r, ns: ns, dev: w}
	sl.sums.tags = v.g.SlotTags(seg, i)
	sl.valid.Store(v.g.StripesPerSegment())
	return sl, nil
}

// namespace returns the state of namespace id, resolving its device
// through the DeviceSet, outside v.mu, on first use.
func (v *Volume) namespace(ctx context.Context, id string) (*nsState, error) {
	v.mu.Lock()
	ns, ok := v.ns[id]
	v.mu.Unlock()
	if ok {
		return ns, nil
	}
	dev, err := v.devs.Device(ctx, id)
	if err != nil {
		return nil, err
	}
	if dev.BlockSize() > blockSize {
		return nil, fmt.Errorf("namespace %s: block size %d above the volume's %d", id, dev.BlockSize(), blockSize)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if ns, ok := v.ns[id]; ok {
		return ns, nil // resolved meanwhile for another segment
	}
	ns = &nsState{id: id, dev: dev}
	v.ns[id] = ns
	v.sync.Store(allSynchronous(v.ns))
	return ns, nil
}

// SetNamespaceUp tells the volume that a namespace is reachable again (up) or
// should be treated as gone (down). Slots that missed writes while it was
// down stay stale until Repair rebuilds them.
func (v *Volume) SetNamespaceUp(id string, up bool) {
	v.mu.Lock()
	ns := v.ns[id]
	v.mu.Unlock()
	if ns != nil {
		ns.down.Store(!up)
	}
}

// DownNamespaces returns the namespaces the volume treats as down (an IO to
// them failed as unavailable, or a flush did), sorted.
func (v *Volume) DownNamespaces() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var ids []string
	for id, ns := range v.ns {
		if ns.down.Load() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Reinstate puts a namespace that was down back into use; the caller has
// checked that it answers again (and is the same namespace). What it held
// before is trusted only where it was flushed: when it went down holding
// unflushed writes, its target may have lost them (a restart loses a
// volatile write cache), so the stripes of its slots written since its last
// flush become holes first, recorded in the StaleLog, as a failed Flush
// does (namespaceLost). Stripes that missed writes while it was down stay
// stale either way, until Repair rebuilds them. It reports whether the
// namespace was down.
func (v *Volume) Reinstate(ctx context.Context, id string) (bool, error) {
	v.mu.Lock()
	ns := v.ns[id]
	v.mu.Unlock()
	if ns == nil || !ns.down.Load() {
		return false, nil
	}
	if ns.unflushed.Load() {
		err := fmt.Errorf("namespace %s went down holding unflushed writes: %w", id, blockdev.ErrUnavailable)
		if err := v.namespaceLost(ctx, ns, nil, err); err != nil {
			return false, err
		}
		ns.unflushed.Store(false) // nothing on it is trusted now
	}
	ns.down.Store(false)
	return true, nil
}

// cachedSegments returns the allocated segments in the cache.
func (v *Volume) cachedSegments() []*segment {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]*segment, 0, len(v.segs))
	for _, s := range v.segs {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// beginWrite marks the segment dirty (once) and counts the write in flight.
func (v *Volume) beginWrite(ctx context.Context, s *segment) error {
	s.dirtyMu.Lock()
	defer s.dirtyMu.Unlock()
	if !s.dirty {
		if err := v.dirty.MarkDirty(ctx, s.id); err != nil {
			return fmt.Errorf("segment %d: marking dirty: %w", s.id, err)
		}
		s.dirty = true
	}
	s.inflight++
	return nil
}

func (v *Volume) endWrite(s *segment) {
	s.dirtyMu.Lock()
	s.inflight--
	s.gen++
	s.dirtyMu.Unlock()
}

// allSynchronous reports whether every namespace device completes IO on the
// calling goroutine without waiting (blockdev.Synchronous).
func allSynchronous(nss map[string]*nsState) bool {
	for _, ns := range nss {
		if !blockdev.IsSynchronous(ns.dev) {
			return false
		}
	}
	return len(nss) > 0
}
