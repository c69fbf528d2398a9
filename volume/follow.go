package volume

import (
	"context"
	"fmt"
)

// Follow makes the volume read segment seg from slots, its placement as
// committed elsewhere (a read-only mapping follows the moves of the
// volume's mover): each slot whose location changed is switched to the new
// one, which must hold every stripe (a move commits a complete, flushed
// slot). slots nil means the segment was freed: it is forgotten and reads
// as its Allocator says from then on. A segment not cached is left alone:
// it is looked up from the Allocator when first used, so the caller updates
// what its Allocator returns before calling Follow.
//
// The switch is atomic with respect to IO: it waits for the IO in flight on
// the segment (which finishes on the old slots) and IO that starts after it
// uses the new ones. A lookup of seg in progress is waited for too (it may
// have read the old placement). Follow returns the number of slots switched;
// once it returns, no IO of this volume reads the old locations.
func (v *Volume) Follow(ctx context.Context, seg int64, slots []SlotRef) (int, error) {
	if slots != nil && len(slots) != v.g.N() {
		return 0, fmt.Errorf("segment %d: placement has %d slots, layout needs %d", seg, len(slots), v.g.N())
	}
	s, err := v.settledSegment(ctx, seg)
	if err != nil {
		return 0, err
	}
	if s == nil {
		v.mu.Lock()
		if slots != nil {
			delete(v.segs, seg) // known unallocated before: look it up again
		}
		v.mu.Unlock()
		return 0, nil
	}
	if slots == nil {
		v.forget(s)
		return 0, nil
	}
	next := make([]*slot, len(slots))
	n := 0
	for i, r := range slots {
		if s.slotRef(i) == r {
			continue
		}
		sl, err := v.openSlot(ctx, r, seg, i)
		if err != nil {
			return 0, fmt.Errorf("segment %d slot %d: %w", seg, i, err)
		}
		next[i] = sl
		n++
	}
	if n == 0 {
		return 0, nil
	}
	s.io.Lock()
	defer s.io.Unlock()
	for i, sl := range next {
		if sl != nil {
			s.slots[i].sums.dropped.Store(true)
			s.slots[i] = sl
		}
	}
	return n, nil
}

// settledSegment returns the cached segment seg (nil when not cached),
// after any lookup of it in progress has finished.
func (v *Volume) settledSegment(ctx context.Context, seg int64) (*segment, error) {
	for {
		v.mu.Lock()
		s, wait := v.segs[seg], v.opening[seg]
		v.mu.Unlock()
		if wait == nil {
			return s, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("segment %d: waiting for its lookup: %w", seg, ctx.Err())
		}
	}
}

// forget drops a segment freed elsewhere from the cache, after the IO in
// flight on it.
func (v *Volume) forget(s *segment) {
	s.io.Lock()
	s.freed = true
	s.io.Unlock()
	v.mu.Lock()
	if v.segs[s.id] == s {
		delete(v.segs, s.id)
	}
	v.mu.Unlock()
}

// slotRef returns the location of slot i. REQUIRES: no move of the segment
// runs (a read-only volume never moves).
func (s *segment) slotRef(i int) SlotRef {
	s.io.RLock()
	defer s.io.RUnlock()
	return s.slots[i].ref
}

// CachedSlots returns the locations the volume reads each cached segment
// from, by segment, in slot order (the old location too while a move runs).
func (v *Volume) CachedSlots() map[int64][]SlotRef {
	out := map[int64][]SlotRef{}
	for _, s := range v.cachedSegments() {
		s.io.RLock()
		var refs []SlotRef
		for _, sl := range s.slots {
			refs = append(refs, sl.ref)
			if p := sl.prev.Load(); p != nil {
				refs = append(refs, p.ref)
			}
		}
		if !s.freed {
			out[s.id] = refs
		}
		s.io.RUnlock()
	}
	return out
}
