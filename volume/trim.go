package volume

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// Trim discards [off, off+n): afterwards it reads as zeros. Whole segments in
// the range are freed; whole stripes are trimmed on every shard; partial
// stripes are written with zeros.
func (v *Volume) Trim(ctx context.Context, off, n int64) error {
	return v.zero(ctx, off, n, true)
}

// WriteZeroes makes [off, off+n) read as zeros, like Trim, but keeps segments
// allocated.
func (v *Volume) WriteZeroes(ctx context.Context, off, n int64) error {
	return v.zero(ctx, off, n, false)
}

// zeroRun is a run of stripes of one segment: whole stripes [first, last], or
// one partial stripe.
type zeroRun struct {
	seg         int64
	first, last int64
	partial     *layout.StripeIO
	off         int64 // logical offset of the run
}

func (v *Volume) zero(ctx context.Context, off, n int64, free bool) error {
	if err := v.checkWrite(off, n); err != nil {
		return err
	}
	for _, r := range v.zeroRuns(off, n) {
		if err := v.zeroRun(ctx, r, free); err != nil {
			return err
		}
	}
	return nil
}

// zeroRuns groups the stripes of [off, off+n) into runs.
func (v *Volume) zeroRuns(off, n int64) []zeroRun {
	var runs []zeroRun
	for _, sio := range v.g.Split(off, n) {
		if !sio.Full(v.g) {
			sio := sio
			runs = append(runs, zeroRun{seg: sio.ID.Segment, partial: &sio, off: off + sio.Pieces[0].Buf})
			continue
		}
		if k := len(runs) - 1; k >= 0 && runs[k].partial == nil && runs[k].seg == sio.ID.Segment && runs[k].last+1 == sio.ID.Stripe {
			runs[k].last++
			continue
		}
		runs = append(runs, zeroRun{seg: sio.ID.Segment, first: sio.ID.Stripe, last: sio.ID.Stripe, off: v.g.Offset(sio.ID)})
	}
	return runs
}

func (v *Volume) zeroRun(ctx context.Context, r zeroRun, free bool) error {
	s, err := v.segmentFor(ctx, r.seg, false)
	if err != nil || s == nil {
		return err // unallocated: already zeros
	}
	if r.partial != nil {
		n := r.partial.Pieces[len(r.partial.Pieces)-1].Buf + r.partial.Pieces[len(r.partial.Pieces)-1].Len - r.partial.Pieces[0].Buf
		sio := *r.partial
		sio.Pieces = append([]layout.Piece(nil), sio.Pieces...)
		for i := range sio.Pieces {
			sio.Pieces[i].Buf -= r.partial.Pieces[0].Buf
		}
		var around atomic.Bool
		return v.flushAround(ctx, v.writeStripe(ctx, sio, make([]byte, n), false, &around), &around)
	}
	if free && r.first == 0 && r.last == v.g.StripesPerSegment()-1 {
		return v.freeSegment(ctx, s)
	}
	if err := v.settledStripes(ctx, r.seg, r.first, r.last); err != nil { // zeroed whole, as by a whole-stripe write
		return err
	}
	if v.g.Log {
		return v.zeroStripesLogged(ctx, s, r.first, r.last, free)
	}
	return v.zeroStripes(ctx, s, r.first, r.last, free)
}

// zeroStripes trims (or zeroes) whole stripes [first, last] of a segment on
// every usable shard: zero data has zero parity, so the stripes stay
// consistent.
func (v *Volume) zeroStripes(ctx context.Context, s *segment, first, last int64, trim bool) error {
	s.io.RLock()
	defer s.io.RUnlock()
	if s.freed {
		return nil
	}
	if err := v.beginWrite(ctx, s); err != nil {
		return err
	}
	defer v.endWrite(s)
	unlock := v.lockStripes(s.id, first, last)
	defer unlock()
	// As in writeStripeOnce: a caller that gave up while the locks were
	// waited for (a client that hung up and sent it again elsewhere) must
	// not zero blocks it may have written since.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("segment %d stripes %d-%d: trim not started: %w", s.id, first, last, err)
	}
	if err := v.zeroReached(s, first, last); err != nil {
		return err // as a write that cannot be done: nothing changed
	}
	done, err := v.logZero(ctx, s, first, last)
	if err != nil {
		return err
	}
	defer done()
	ctx = context.WithoutCancel(ctx)
	off, n := first*v.g.Chunk, (last-first+1)*v.g.Chunk
	err = v.each(len(s.slots), func(i int) error {
		copies := []*slot{s.slots[i]}
		if p := s.slots[i].prev.Load(); p != nil {
			copies = append(copies, p) // during a move both must read zeros
		}
		for _, sl := range copies {
			if err := v.zeroSlot(ctx, s, sl, i, first, off, n, trim); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return v.zeroReached(s, first, last)
}

// zeroReached fails with the StripeError of the first stripe of [first,
// last] of s that fewer than K of its shards serve. Zeroing whole stripes
// is acknowledged, as a write is, only when each stripe reads as zeros
// from the shards that took it: at most M may have missed it (zeroSlot
// marks those stale). A zeroing that failed so leaves the stripes as a
// failed write does: each block holds its old data or zeros, or reads fail
// (over-stale, see overstale.go). REQUIRES: the stripes' locks held.
func (v *Volume) zeroReached(s *segment, first, last int64) error {
	u := make([]bool, v.g.N())
	for t := first; t <= last; t++ {
		id := layout.StripeID{Segment: s.id, Stripe: t}
		if count(v.usableInto(u, s, id)) < v.g.K {
			return v.stripeError(s, id, u)
		}
	}
	return nil
}

// zeroSlot trims or zeroes [off, off+n) of one copy of slot i, stripes
// [first, ...]; a copy that cannot take it missed those stripes: they
// become holes, as for a write that went around it (missedRun).
func (v *Volume) zeroSlot(ctx context.Context, s *segment, sl *slot, i int, first, off, n int64, trim bool) error {
	last := first + n/v.g.Chunk - 1
	if sl.ns.down.Load() {
		return v.missedZero(ctx, s, i, first, last, sl)
	}
	var err error
	if trim {
		err = sl.dev.Trim(ctx, off, n)
	} else {
		err = sl.dev.WriteZeroes(ctx, off, n)
	}
	if err == nil {
		v.noteWritten(sl, first, last)
		if v.g.Checksums {
			err = v.zeroSums(ctx, sl, first, last)
		}
	}
	if err == nil {
		return nil
	}
	if isShardFault(v.shardFailed(s, sl, i, first, err)) {
		return v.missedZero(ctx, s, i, first, last, sl)
	}
	return fmt.Errorf("segment %d slot %d: zeroing: %w", s.id, i, err)
}

// missedZero records that copy sl of slot i missed the zeroing of stripes
// [first, last]: as holes, unless it is stale there already.
func (v *Volume) missedZero(ctx context.Context, s *segment, i int, first, last int64, sl *slot) error {
	return v.missedRun(ctx, s, i, first, last, sl, sl.valid.Load() > last && !sl.logged.Load())
}

// lockStripes takes the locks of stripes [first, last] of seg in lock order
// (no deadlock with other multi-stripe lockers) and returns the unlock.
func (v *Volume) lockStripes(seg, first, last int64) func() {
	var held [lockCount]bool
	for t := first; t <= last; t++ {
		held[lockIndex(layout.StripeID{Segment: seg, Stripe: t})] = true
	}
	for i := range held {
		if held[i] {
			v.locks[i].Lock()
		}
	}
	return func() {
		for i := range held {
			if held[i] {
				v.locks[i].Unlock()
			}
		}
	}
}

// freeSegment trims a whole segment's slots and releases it to the
// allocator. It waits for IO in flight on the segment.
func (v *Volume) freeSegment(ctx context.Context, s *segment) error {
	s.io.Lock()
	defer s.io.Unlock()
	if s.freed {
		return nil
	}
	err := v.each(len(s.slots), func(i int) error {
		s.slots[i].sums.dropped.Store(true) // no queued checksum may land after the trim
		if s.slots[i].ns.down.Load() {
			return nil
		}
		err := s.slots[i].dev.Trim(ctx, 0, v.g.SlotSize)
		if blockdev.Class(err) == blockdev.ErrUnavailable {
			return nil // reallocation trims it again
		}
		return err
	})
	if err == nil {
		// The trim must be durable before the slots can go to a new owner:
		// a crash must not bring old data back into a reallocated slot.
		err = v.flushSlots(ctx, s)
	}
	if err != nil {
		return fmt.Errorf("segment %d: trimming before free: %w", s.id, err)
	}
	if err := v.alloc.Free(ctx, s.id); err != nil {
		return fmt.Errorf("segment %d: free: %w", s.id, err)
	}
	s.freed = true
	v.mu.Lock()
	v.segs[s.id] = nil
	v.mu.Unlock()
	if err := v.dirty.MarkClean(ctx, []int64{s.id}); err != nil {
		return fmt.Errorf("segment %d: marking clean after free: %w", s.id, err)
	}
	return v.forgetUnsettled(ctx, s.id) // freed: reads zeros, nothing left unsettled
}

// Allocated reports the allocated segments' extents inside [off, off+n).
func (v *Volume) Allocated(ctx context.Context, off, n int64) ([]blockdev.Extent, error) {
	if err := v.check(off, n); err != nil {
		return nil, err
	}
	var out []blockdev.Extent
	sd := v.g.SegmentData()
	for pos := off; pos < off+n; {
		seg := pos / sd
		end := min((seg+1)*sd, off+n)
		s, err := v.segmentFor(ctx, seg, false)
		if err != nil {
			return nil, err
		}
		if s != nil {
			if k := len(out) - 1; k >= 0 && out[k].Off+out[k].Len == pos {
				out[k].Len += end - pos
			} else {
				out = append(out, blockdev.Extent{Off: pos, Len: end - pos})
			}
		}
		pos = end
	}
	return out, nil
}

// flushSlots flushes the namespaces of a segment's usable slots.
func (v *Volume) flushSlots(ctx context.Context, s *segment) error {
	return v.each(len(s.slots), func(i int) error {
		if s.slots[i].ns.down.Load() {
			return nil
		}
		err := s.slots[i].ns.dev.Flush(ctx)
		if blockdev.Class(err) == blockdev.ErrUnavailable {
			return nil
		}
		return err
	})
}

// ZeroIsFast reports whether zeroing [off, off+n) needs no data written: the
// range covers whole stripes only, which are trimmed or zeroed on every
// shard (zero data has zero parity).
func (v *Volume) ZeroIsFast(off, n int64, _ bool) bool {
	sd := v.g.StripeData()
	return off%sd == 0 && n%sd == 0
}
