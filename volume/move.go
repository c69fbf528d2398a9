package volume

import (
	"context"
	"errors"
	"fmt"

	"github.com/nvstripe/nvstripe/blockdev"
)

// ErrMoveAborted is returned by MoveSlot when the move could not finish; the
// segment keeps its old placement and the destination slot can be released.
var ErrMoveAborted = errors.New("move aborted")

// MoveOptions configure MoveSlot.
type MoveOptions struct {
	// Commit records the new placement durably (one transaction in etcd). It
	// is called once the destination holds every stripe and is flushed,
	// while writes still reach both locations; the old slot must stay
	// reserved until MoveSlot returns. Required.
	Commit func(ctx context.Context) error
	// Progress, when set, is called after each stripe with stripes done and
	// the total.
	Progress func(done, total int64)
	// Pace, when set, is called before each stripe with the bytes it will
	// write; it throttles the move (and may fail it with ctx's error).
	Pace func(ctx context.Context, n int64) error
}

func (o *MoveOptions) progress(done, total int64) {
	if o != nil && o.Progress != nil {
		o.Progress(done, total)
	}
}

func (o *MoveOptions) pace(ctx context.Context, n int64) error {
	if o != nil && o.Pace != nil {
		return o.Pace(ctx, n)
	}
	return nil
}

// MoveSlot moves slot idx of segment seg to the slot to, with IO running:
// rebuild (the old slot is lost: stripes are reconstructed), rebalance and
// drain (the old slot is healthy: stripes are copied). While it runs, every
// write reaches the old slot and, for stripes already moved, the new one;
// reads use the new slot below the move's mark and the old one above it.
// The new placement is committed only when the new slot is complete and
// flushed; then the old slot is detached and, once MoveSlot returns, may be
// released. On failure the segment is left on its old placement.
func (v *Volume) MoveSlot(ctx context.Context, seg int64, idx int, to SlotRef, o MoveOptions) error {
	if o.Commit == nil || idx < 0 || idx >= v.g.N() {
		return fmt.Errorf("move segment %d slot %d: bad arguments: %w", seg, idx, blockdev.ErrInvalid)
	}
	s, err := v.acquire(ctx, seg, false)
	if err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("move segment %d: not allocated: %w", seg, blockdev.ErrInvalid)
	}
	s.io.RUnlock()
	next, err := v.attachMove(ctx, s, idx, to)
	if err != nil {
		return err
	}
	if err := v.runMove(ctx, s, idx, next, &o); err != nil {
		v.detachMove(s, idx, next, false)
		return fmt.Errorf("move segment %d slot %d to %s/%d: %w: %w", seg, idx, to.NS, to.Slot, ErrMoveAborted, err)
	}
	v.detachMove(s, idx, next, true)
	return nil
}

// attachMove installs the destination as slot idx, with the current slot as
// its old location and nothing valid yet.
func (v *Volume) attachMove(ctx context.Context, s *segment, idx int, to SlotRef) (*slot, error) {
	next, err := v.openSlot(ctx, to, s.id, idx)
	if err != nil {
		return nil, err
	}
	next.valid.Store(0)
	if v.g.Log {
		// Records written before the move are not copied (runMove makes
		// them dead); none from the slot's earlier use may be read as its.
		if err := next.dev.Trim(ctx, v.g.LogOffset(), v.g.LogArea()); err != nil {
			return nil, fmt.Errorf("clearing the write log of %s/%d: %w", to.NS, to.Slot, err)
		}
	}
	s.io.Lock()
	defer s.io.Unlock()
	if s.freed {
		return nil, fmt.Errorf("move segment %d: freed meanwhile: %w", s.id, blockdev.ErrInvalid)
	}
	if s.slots[idx].prev.Load() != nil {
		return nil, fmt.Errorf("move segment %d slot %d: another move is running: %w", s.id, idx, blockdev.ErrInvalid)
	}
	next.prev.Store(s.slots[idx])
	s.slots[idx] = next
	return next, nil
}

// runMove fills the destination, flushes it and commits.
func (v *Volume) runMove(ctx context.Context, s *segment, idx int, next *slot, o *MoveOptions) error {
	s.io.RLock()
	_, err := v.fill(ctx, s, idx, o)
	s.io.RUnlock()
	if err != nil {
		return err
	}
	if next.valid.Load() != v.g.StripesPerSegment() {
		return fmt.Errorf("destination namespace %s went away: %w", next.ref.NS, blockdev.ErrUnavailable)
	}
	if err := v.storeSums(ctx, next); err != nil {
		return err
	}
	if err := next.ns.dev.Flush(ctx); err != nil {
		return err
	}
	if v.g.Log {
		// The old location's write-log records leave with it: make the
		// writes they protect durable first.
		if err := v.storeSums(ctx, nil); err != nil {
			return err
		}
		s.io.RLock()
		err := v.flushSlots(ctx, s)
		s.io.RUnlock()
		if err != nil {
			return err
		}
	}
	return o.Commit(ctx)
}

// detachMove ends a move: on success the old location is dropped; on failure
// the old slot is put back (it received every write).
func (v *Volume) detachMove(s *segment, idx int, next *slot, ok bool) {
	s.io.Lock()
	defer s.io.Unlock()
	prev := next.prev.Load()
	next.prev.Store(nil)
	if !ok {
		s.slots[idx] = prev
		next.sums.dropped.Store(true) // the destination may be given to another segment
	} else {
		prev.sums.dropped.Store(true) // the old location is released
	}
}
