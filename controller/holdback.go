package controller

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/internal/retry"
	"github.com/nvstripe/nvstripe/meta"
)

// maxBackoff caps how long a volume's moves wait after its ownership was
// found busy.
const maxBackoff = time.Minute

// volBackoff is a volume whose moves wait: until when, and the last wait.
type volBackoff struct {
	until time.Time
	wait  time.Duration
}

// holdBack returns the State Decide works on: snap's, less the segments of
// volumes whose moves cannot start now, so that they neither take the move
// budget of other volumes every tick nor start and fail in a loop.
//
// A volume is held back for a while after the Mover found its ownership
// busy (a mapping raced the snapshot), unless it has a read-write owner
// now: from Interval, doubling, to maxBackoff. A volume mapped read-only
// only is not held back: the Mover takes it as a mover beside its readers,
// which follow the moves (meta.OwnerOptions.Mover).
func (r *Runner) holdBack(snap *Snapshot, now time.Time) decide.State {
	held := map[string]bool{}
	r.mu.Lock()
	for v, b := range r.backoff {
		if now.Before(b.until) && snap.Owners[v] == "" && !held[v] {
			held[v] = true
			r.noteHeld(v, fmt.Sprintf("its ownership was busy: its moves wait %v", b.wait))
		}
	}
	r.mu.Unlock()
	for v := range r.heldNoted {
		if !held[v] || snap.Volumes[v] == nil {
			delete(r.heldNoted, v)
		}
	}
	if len(held) == 0 {
		return snap.State
	}
	st := snap.State
	st.Segments = slices.DeleteFunc(slices.Clone(st.Segments), func(s decide.Segment) bool { return held[s.ID.Volume] })
	return st
}

// noteHeld logs why a volume is held back, once per reason.
func (r *Runner) noteHeld(v, why string) {
	if r.heldNoted[v] == why {
		return
	}
	r.heldNoted[v] = why
	r.cfg.Logf("volume %s: %s", v, why)
}

// busy records that the Mover found a volume's ownership busy (err wraps
// meta.ErrBusy) or that its move succeeded (err nil). REQUIRES: mu held.
func (r *Runner) busyLocked(vol string, err error, now time.Time) {
	if err == nil {
		delete(r.backoff, vol)
		return
	}
	if !errors.Is(err, meta.ErrBusy) {
		return
	}
	r.backoff[vol] = r.backoff[vol].grow(now, r.cfg.Interval)
}

// grow returns b after one more wait, counted from now: from interval,
// doubling, to maxBackoff.
func (b volBackoff) grow(now time.Time, interval time.Duration) volBackoff {
	b.wait = retry.Options{Initial: interval, Max: maxBackoff}.Grow(b.wait)
	b.until = now.Add(b.wait)
	return b
}
