package volclient

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/retry"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volume"
)

// follower is a read-only mapping's segment map: the volume engine's
// Allocator, kept in memory from one list of the volume's segments and a
// watch from that revision on (meta.VolumeMap.WatchSegments). When a
// segment's slots change (a move of the controller's mover commits) it
// updates its map, then switches the volume's cached segment
// (volume.Follow: reads in flight finish on the old slot, later ones use
// the new; first it loads the unsettled blocks the owner recorded,
// volume.FollowUnsettled, so that a blank a rebuild of the move wrote reads
// as corrupt), and then publishes the revision it has applied in the reader's
// owner record (meta.Owner.SetApplied). The mover releases the old slot
// only once every reader has published the commit's revision or lost its
// lease (meta.VolumeMap.FinishMove), so no reader ever reads a slot that
// was released. A watch that breaks (etcd away, history compacted) is
// replaced by a fresh list and watch, after a wait that doubles from
// followRetry to followRetryMax; nothing is published meanwhile.
type follower struct {
	vm    *meta.VolumeMap
	owner *meta.Owner
	logf  func(string, ...any)
	vol   *volume.Volume  // set before run
	hold  func(seg int64) // OpenOptions.followHold

	mu   sync.Mutex
	segs map[int64][]meta.SlotRef
}

const (
	followRetry    = 100 * time.Millisecond
	followRetryMax = 5 * time.Second
)

var _ volume.Allocator = (*follower)(nil)

// newFollower lists the volume's segments and publishes the revision of
// the list as applied; run follows from that revision.
func newFollower(ctx context.Context, vm *meta.VolumeMap, owner *meta.Owner, logf func(string, ...any)) (*follower, int64, error) {
	f := &follower{vm: vm, owner: owner, logf: logf, segs: map[int64][]meta.SlotRef{}}
	segs, rev, err := vm.Segments(ctx)
	if err != nil {
		return nil, 0, err
	}
	for id, rec := range segs {
		f.segs[id] = rec.Slots
	}
	return f, rev, owner.SetApplied(ctx, rev)
}

// Lookup implements volume.Allocator from the followed map.
func (f *follower) Lookup(_ context.Context, seg int64) ([]volume.SlotRef, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	refs, ok := f.segs[seg]
	if !ok {
		return nil, false, nil
	}
	return toVolume(refs), true, nil
}

// Allocate implements volume.Allocator: a reader allocates nothing.
func (f *follower) Allocate(context.Context, int64) ([]volume.SlotRef, error) {
	return nil, fmt.Errorf("volume mapped read-only: no allocation: %w", blockdev.ErrInvalid)
}

// Free implements volume.Allocator: a reader frees nothing.
func (f *follower) Free(context.Context, int64) error {
	return fmt.Errorf("volume mapped read-only: no free: %w", blockdev.ErrInvalid)
}

// run follows the segment map from revision rev until ctx ends.
func (f *follower) run(ctx context.Context, rev int64) {
	waits := retry.NewBackoff(retry.Options{Initial: followRetry, Max: followRetryMax})
	for {
		err := f.follow(ctx, rev)
		if ctx.Err() != nil {
			return
		}
		f.logf("volume %s: following the segment map: %v; listing it again", f.owner.Volume(), err)
		for {
			if retry.Sleep(ctx, waits.Next()) != nil {
				return
			}
			if rev, err = f.relist(ctx); err == nil {
				waits.Reset()
				break
			}
			if ctx.Err() != nil {
				return
			}
			f.logf("volume %s: listing the segment map: %v", f.owner.Volume(), err)
		}
	}
}

// follow applies the watch's events after rev until it breaks, publishing
// the revision applied whenever a change was applied and no event waits.
func (f *follower) follow(ctx context.Context, rev int64) error {
	ch := f.vm.WatchSegments(ctx, rev)
	pending := int64(0)
	for ev := range ch {
		if ev.Err != nil {
			return ev.Err
		}
		changed, err := f.apply(ctx, ev.Segment, ev.Record)
		if err != nil {
			return err
		}
		if changed {
			pending = ev.Rev
		}
		if pending > 0 && len(ch) == 0 {
			if err := f.owner.SetApplied(ctx, pending); err != nil {
				return err
			}
			pending = 0
		}
	}
	return ctx.Err()
}

// relist reads the whole map again, applies what changed (segments gone
// too) and publishes the revision of the read.
func (f *follower) relist(ctx context.Context) (int64, error) {
	segs, rev, err := f.vm.Segments(ctx)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	gone := []int64{}
	for id := range f.segs {
		if segs[id] == nil {
			gone = append(gone, id)
		}
	}
	f.mu.Unlock()
	for _, id := range gone {
		if _, err := f.apply(ctx, id, nil); err != nil {
			return 0, err
		}
	}
	for id, rec := range segs {
		if _, err := f.apply(ctx, id, rec); err != nil {
			return 0, err
		}
	}
	return rev, f.owner.SetApplied(ctx, rev)
}

// apply records segment seg's placement (rec nil: freed) and switches the
// volume to it; it reports whether the slots changed.
func (f *follower) apply(ctx context.Context, seg int64, rec *meta.SegmentRecord) (bool, error) {
	var slots []meta.SlotRef
	if rec != nil {
		slots = slices.Clone(rec.Slots)
	}
	f.mu.Lock()
	old, had := f.segs[seg]
	if rec == nil {
		delete(f.segs, seg)
	} else {
		f.segs[seg] = slots
	}
	f.mu.Unlock()
	if had == (rec != nil) && slices.Equal(old, slots) {
		return false, nil
	}
	var refs []volume.SlotRef
	if rec != nil {
		refs = toVolume(slots)
	}
	if f.hold != nil {
		f.hold(seg)
	}
	err := f.vol.FollowUnsettled(ctx) // the blanks a rebuild of the move wrote, before reads reach them
	if err == nil {
		_, err = f.vol.Follow(ctx, seg, refs)
	}
	if err != nil {
		f.mu.Lock() // not applied: the next list tries again
		if had {
			f.segs[seg] = old
		} else {
			delete(f.segs, seg)
		}
		f.mu.Unlock()
		return false, fmt.Errorf("segment %d: switching to its new slots: %w", seg, err)
	}
	return true, nil
}
