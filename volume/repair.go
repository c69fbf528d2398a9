package volume

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// Repair rebuilds every stale slot (one that missed writes or returned
// corrupt data, or one the StaleLog names) whose namespace is up, stripe by
// stripe, from the other shards, and clears the StaleLog mark of each slot
// it made whole. Writes keep flowing: a stripe already rebuilt receives new
// writes, one not yet rebuilt is rebuilt after them. A slot it cannot
// repair (its namespace still lacks space, a stripe it cannot rebuild) is
// skipped, the others repaired, and the first error returned at the end,
// one of lacking space last: a stripe that fails every time must not keep
// every slot after it stale. It returns the number of stripes rebuilt.
func (v *Volume) Repair(ctx context.Context) (int64, error) {
	if err := v.openStale(ctx); err != nil {
		return 0, err
	}
	var total int64
	var failed, noSpace error
	for _, s := range v.cachedSegments() {
		for i := range s.slots {
			n, err := v.repairSlot(ctx, s, i)
			total += n
			switch {
			case ctx.Err() != nil:
				return total, cmp.Or(err, ctx.Err())
			case blockdev.Class(err) == blockdev.ErrNoSpace:
				noSpace = cmp.Or(noSpace, err)
			case err != nil:
				failed = cmp.Or(failed, err)
			}
		}
	}
	return total, cmp.Or(failed, noSpace)
}

// repairSegment does what Repair does for segment seg alone (nothing when
// it is not allocated); a slot still short of space is left as it is.
func (v *Volume) repairSegment(ctx context.Context, seg int64) error {
	s, err := v.acquire(ctx, seg, false)
	if err != nil || s == nil {
		return err
	}
	s.io.RUnlock() // repairSlot takes it per slot, as Repair does
	for i := range s.slots {
		if _, err := v.repairSlot(ctx, s, i); err != nil && blockdev.Class(err) != blockdev.ErrNoSpace {
			return err
		}
	}
	return nil
}

func (v *Volume) repairSlot(ctx context.Context, s *segment, i int) (int64, error) {
	s.io.RLock()
	defer s.io.RUnlock()
	sl := s.slots[i]
	if s.freed || sl.ns.down.Load() || sl.prev.Load() != nil {
		return 0, nil // gone, or being moved (the move fills it)
	}
	if sl.valid.Load() == v.g.StripesPerSegment() && sl.holes.Load() == nil {
		return 0, v.clearStale(ctx, s, i) // healthy; marked after a reopen only
	}
	n, err := v.fill(ctx, s, i, nil)
	if err != nil {
		return n, err
	}
	h, err := v.fillHoles(ctx, s, i)
	if err != nil {
		return n + h, err
	}
	return n + h, v.clearStale(ctx, s, i)
}

// fillHoles rebuilds the holes of slot i of s (stripes it missed for lack
// of space) and records the ones left, once what it wrote is durable
// (slotDurable). A hole it cannot rebuild stays, the others are rebuilt,
// and the first error is returned; it stops at a namespace still out of
// space (ErrNoSpace) or a cancelled ctx. REQUIRES: s.io held shared.
func (v *Volume) fillHoles(ctx context.Context, s *segment, i int) (int64, error) {
	sl := s.slots[i]
	var n int64
	var err error
	noSpace := false
	for _, r := range sl.holesOf() {
		for t := r.From; t < r.To && !noSpace && ctx.Err() == nil && !sl.ns.down.Load(); t++ {
			ferr := v.fillHoleRetry(ctx, s, i, t)
			err, noSpace = cmp.Or(err, ferr), blockdev.Class(ferr) == blockdev.ErrNoSpace
			if ferr == nil && !sl.hasHole(t) { // one left unsettled stays
				n++
			}
		}
	}
	err = cmp.Or(err, ctx.Err())
	if n == 0 {
		return 0, err
	}
	if ferr := v.slotDurable(ctx, s, i); ferr != nil {
		return n, errors.Join(err, ferr)
	}
	return n, errors.Join(err, v.recordHoles(ctx, s, i, sl))
}

// fillHoleRetry fills hole t of slot i of s, planning again without a
// shard that fails meanwhile (the fault marks it), as fill does. It gives
// up without error when the slot's own namespace goes down.
func (v *Volume) fillHoleRetry(ctx context.Context, s *segment, i int, t int64) error {
	for faults := 0; ; faults++ {
		err := v.fillHole(ctx, s, i, t)
		if s.slots[i].ns.down.Load() {
			return nil
		}
		if !isShardFault(err) || faults >= v.g.N() {
			return err
		}
	}
}

// fillHole rebuilds hole t of slot i of s, when it is still one.
func (v *Volume) fillHole(ctx context.Context, s *segment, i int, t int64) error {
	id := layout.StripeID{Segment: s.id, Stripe: t}
	defer v.lockStripe(id)()
	sl := s.slots[i]
	if !sl.hasHole(t) {
		return nil
	}
	err := v.rebuildChunk(ctx, s, i, id)
	if ose := (*OverStaleError)(nil); errors.As(err, &ose) {
		return nil // unsettled rows: the hole stays, reads of them fail
	}
	if err != nil {
		return fmt.Errorf("segment %d slot %d stripe %d (namespace %s): rebuilding a stripe it missed: %w", s.id, i, t, sl.ref.NS, err)
	}
	s.removeHole(sl, t)
	return nil
}

// fill brings slot i of s up to date from its first stale stripe to the end:
// each stripe is copied from the old location during a move when that still
// serves it, and reconstructed from the other shards otherwise. It stops
// early, without error, when the slot's namespace goes down. REQUIRES: s.io
// held shared.
func (v *Volume) fill(ctx context.Context, s *segment, i int, o *MoveOptions) (int64, error) {
	var n int64
	faults := 0
	for {
		sl := s.slots[i]
		t := sl.valid.Load()
		if t >= v.g.StripesPerSegment() || sl.ns.down.Load() {
			return n, nil
		}
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if err := o.pace(ctx, v.g.Chunk); err != nil {
			return n, err
		}
		err := v.fillStripe(ctx, s, i, t)
		if isShardFault(err) && faults < v.g.N() {
			faults++ // the failing shard is marked; try without it
			continue
		}
		if err != nil {
			return n, err
		}
		n++
		o.progress(t+1, v.g.StripesPerSegment())
	}
}

// fillStripe writes the chunk slot i holds for stripe t and, when no write
// marked the slot stale meanwhile, advances its valid mark past t.
func (v *Volume) fillStripe(ctx context.Context, s *segment, i int, t int64) error {
	id := layout.StripeID{Segment: s.id, Stripe: t}
	defer v.lockStripe(id)()
	sl := s.slots[i]
	if sl.valid.Load() != t {
		return nil // a write moved the mark; the caller re-reads it
	}
	if err := v.rebuildChunk(ctx, s, i, id); err != nil {
		return err
	}
	sl.valid.CompareAndSwap(t, t+1)
	s.removeHole(sl, t) // a hole the mark had gone below
	return nil
}

// rebuildChunk writes the current content of slot i for stripe id (from
// the old location during a move, else reconstructed) to the slot.
// REQUIRES: stripe lock held.
func (v *Volume) rebuildChunk(ctx context.Context, s *segment, i int, id layout.StripeID) error {
	sl, t := s.slots[i], id.Stripe
	if v.g.Seed != 0 && v.stripeUnsettled(id) {
		return v.rebuildUnsettled(ctx, s, i, id) // never garbage rebuilt from poisoned parity
	}
	if err := v.unsettled(id, v.g.ShardIn(t, i), 0, v.g.Chunk); err != nil {
		return err // format 3 has no blank to carry it over with (rebuildUnsettled)
	}
	if v.overStale(s, id) {
		return v.repairOverStale(ctx, s, id)
	}
	b := &stripeBufs{v: v, shards: make([][]byte, v.g.N())}
	defer b.release()
	chunk, err := v.chunkFor(ctx, s, i, id, b)
	if isChecksumFault(err) {
		if err := v.healStripe(ctx, s, id, healRead); err != nil {
			return err
		}
		chunk, err = v.chunkFor(ctx, s, i, id, b)
	}
	if err != nil {
		return err
	}
	var sums []uint32
	if v.g.Checksums {
		sums = blockSums(nil, chunk)
	}
	if err := v.slotWrite(ctx, sl, t, 0, chunk, sums, false); err != nil {
		return v.shardFailed(s, sl, i, t, err)
	}
	return nil
}

// chunkFor returns the current content of slot i for stripe id: read from
// the old location during a move when it serves the stripe, else
// reconstructed from K other shards. REQUIRES: stripe lock held.
func (v *Volume) chunkFor(ctx context.Context, s *segment, i int, id layout.StripeID, b *stripeBufs) ([]byte, error) {
	target := v.g.ShardIn(id.Stripe, i)
	if p := s.slots[i].prev.Load(); p != nil && p.serves(id.Stripe) {
		buf := b.alloc(target, v.g.Chunk)
		err := p.dev.ReadAt(ctx, buf, v.g.SlotOffset(id))
		if err == nil && v.g.Checksums {
			if err = v.verify(ctx, s, i, p, id.Stripe, 0, buf); isChecksumFault(err) {
				return nil, &shardFault{err: err}
			}
		}
		return buf, v.shardFailed(s, p, i, id.Stripe, err)
	}
	if err := v.proveSpan(ctx, s, id, 0, v.g.Chunk); err != nil {
		return nil, err // never a chunk rebuilt from a stale shard
	}
	usable := v.usableShards(s, id)
	usable[target] = false
	if count(usable) < v.g.K {
		return nil, v.stripeError(s, id, usable)
	}
	reads := pickK(v.g, usable)
	want := make([]bool, v.g.N())
	want[target] = true
	for sh := range b.shards {
		buf := b.alloc(sh, v.g.Chunk)
		if !contains(reads, sh) {
			b.shards[sh] = buf[:0]
		}
	}
	if err := v.readShards(ctx, s, id, reads, b.shards, 0); err != nil {
		return nil, err
	}
	if err := v.codec.ReconstructRange(b.shards, want); err != nil {
		return nil, fmt.Errorf("segment %d stripe %d: reconstruct: %w", s.id, id.Stripe, err)
	}
	return b.shards[target][:v.g.Chunk], nil
}

// Resync recomputes the parity of every stripe of segment seg from its data.
// It is what an owner runs on segments left dirty by a crash: data shards
// hold whatever the crash left; parity is made to agree with them. Every data
// shard must be usable.
func (v *Volume) Resync(ctx context.Context, seg int64) error {
	s, err := v.acquire(ctx, seg, false)
	if err != nil || s == nil {
		return err
	}
	defer s.io.RUnlock()
	if v.g.Log {
		return v.resyncLogged(ctx, s)
	}
	for t := int64(0); t < v.g.StripesPerSegment(); t++ {
		if err := v.resyncStripe(ctx, s, t); err != nil {
			return err
		}
	}
	return nil
}

func (v *Volume) resyncStripe(ctx context.Context, s *segment, t int64) error {
	return v.retryStripe(s, t, func(id layout.StripeID) error { return v.resyncOnce(ctx, s, id) })
}

func (v *Volume) resyncOnce(ctx context.Context, s *segment, id layout.StripeID) error {
	t := id.Stripe
	if v.g.Checksums {
		return v.healStripe(ctx, s, id, healResync)
	}
	usable := v.usableShards(s, id)
	data := make([]int, v.g.K)
	for sh := range data {
		if !usable[sh] {
			return fmt.Errorf("segment %d stripe %d: resync needs every data shard: %w", s.id, t, v.stripeError(s, id, usable))
		}
		data[sh] = sh
	}
	b := &stripeBufs{v: v, shards: make([][]byte, v.g.N())}
	defer b.release()
	for sh := range b.shards {
		b.alloc(sh, v.g.Chunk)
	}
	if err := v.readShards(ctx, s, id, data, b.shards, 0); err != nil {
		return err
	}
	if err := v.codec.Encode(b.shards); err != nil {
		return err
	}
	return v.each(v.g.M, func(j int) error {
		sh := v.g.K + j
		if !usable[sh] {
			return nil
		}
		return v.shardWrite(ctx, s, id, sh, b.shards[sh], nil, 0, false)
	})
}

// Recover makes the volume consistent after an unclean stop: it resyncs every
// segment the DirtyLog lists, flushes, and marks them clean. Run it once after
// opening, before serving IO. Without a write log (formats 1 and 2), a
// segment that lacks a data shard (its namespace is down, or its slot
// missed writes) cannot be resynced: it stays dirty, is reported through
// EventListener.ShardError, and is resynced by a later Recover; the open
// goes on (reads reconstruct around the missing shard; stripes that had a
// write in flight at the stop may then read wrong data in the missing
// shard's range, the write hole a crash plus a lost shard leaves). With a
// write log (format 3) such stripes are settled from their records
// (ppl_recover.go); only stripes with two data shards missing, or rows the
// records cannot settle (UnsettledError), keep their segment dirty.
// It loads the UnsettledLog first (LoadUnsettled).
func (v *Volume) Recover(ctx context.Context) (int, error) {
	if err := v.LoadUnsettled(ctx); err != nil {
		return 0, err
	}
	segs, err := v.dirty.Dirty(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading dirty segments: %w", err)
	}
	done := make([]int64, 0, len(segs))
	for _, seg := range segs {
		err := v.Resync(ctx, seg)
		if ns, ok := deferredNS(err); ok {
			v.deferred.set(seg, true)
			v.ev.shardError(ShardInfo{NS: ns, Segment: seg, Slot: -1, Err: fmt.Errorf("resync deferred: %w", err)})
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("resync segment %d: %w", seg, err)
		}
		v.deferred.set(seg, false)
		done = append(done, seg)
	}
	if err := v.Flush(ctx); err != nil {
		return 0, err
	}
	if err := v.dirty.MarkClean(ctx, done); err != nil {
		return 0, fmt.Errorf("marking %d resynced segments clean: %w", len(done), err)
	}
	return len(done), nil
}

// deferredSet holds the segments whose resync Recover deferred. Until a
// later Recover settles them, a block that does not match its checksum
// there may be a write the unclean stop tore, not bad media
// (ChecksumInfo.Unsettled).
type deferredSet struct {
	mu   sync.Mutex
	segs map[int64]bool
}

func (d *deferredSet) set(seg int64, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !on {
		delete(d.segs, seg)
		return
	}
	if d.segs == nil {
		d.segs = map[int64]bool{}
	}
	d.segs[seg] = true
}

// resyncPending reports whether Recover deferred the resync of segment seg.
func (v *Volume) resyncPending(seg int64) bool {
	d := &v.deferred
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.segs[seg]
}

// deferredNS reports whether err leaves a segment dirty for a later
// Recover, and names a namespace it misses.
func deferredNS(err error) (string, bool) {
	var se *StripeError
	var ue *UnsettledError
	switch {
	case errors.As(err, &se):
		return se.Missing[0], true
	case errors.As(err, &ue):
		return ue.NS, true
	}
	return "", false
}

// Clean flushes the volume and marks clean every dirty segment that had no
// write in flight and none since the flush began, but a segment whose
// resync Recover deferred: it holds stripes the unclean stop may have left
// torn, which only a later Recover settles. The owner calls it when the
// volume has been idle for a while.
func (v *Volume) Clean(ctx context.Context) error {
	segs := v.cachedSegments()
	gens := make([]int64, len(segs))
	for i, s := range segs {
		s.dirtyMu.Lock()
		gens[i] = s.gen
		s.dirtyMu.Unlock()
	}
	if err := v.Flush(ctx); err != nil {
		return err
	}
	var ids []int64
	var held []*segment
	defer func() {
		for _, s := range held {
			s.dirtyMu.Unlock()
		}
	}()
	for i, s := range segs {
		s.dirtyMu.Lock()
		if s.dirty && s.inflight == 0 && s.gen == gens[i] && !v.resyncPending(s.id) {
			ids = append(ids, s.id)
			held = append(held, s)
			continue
		}
		s.dirtyMu.Unlock()
	}
	if len(ids) == 0 {
		return nil
	}
	if err := v.dirty.MarkClean(ctx, ids); err != nil {
		return fmt.Errorf("marking %d segments clean: %w", len(ids), err)
	}
	for _, s := range held {
		s.dirty = false
	}
	return nil
}
