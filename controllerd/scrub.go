package controllerd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nvstripe/nvstripe/meta"
)

// scrubDue reports whether volume's scrub, last recorded as t (nil: none),
// should start again at now, mapper being who maps the volume read-write
// now (meta.Store.Mapper): none has run, the last ended (done or failed)
// interval ago or longer, or the last one ended without an end time (it
// was interrupted). A scrub running at its holder is never due; one
// addressed to a holder that no longer maps the volume is (orphaned).
func scrubDue(t *meta.TaskRecord, mapper string, now time.Time, interval time.Duration) bool {
	if t == nil {
		return true
	}
	if t.State == meta.TaskRunning {
		return t.Holder != mapper
	}
	ended, err := time.Parse(time.RFC3339, t.Ended)
	return err != nil || now.Sub(ended) >= interval
}

// startDueScrubs starts the scrub of every checksummed volume mapped
// read-write whose last scrub is older than interval, and returns the
// volumes it started. An unmapped volume waits until it is mapped: the
// owner runs its scrub. A scrub left running by a holder that no longer
// maps the volume (killed, unmapped, or a mover that never ran it) is
// restarted at the volume's new owner, or ended as failed when there is
// none, so that no task stays running with nobody to run it.
func startDueScrubs(ctx context.Context, s *meta.Store, now time.Time, interval time.Duration) ([]string, error) {
	vols, err := s.Volumes(ctx)
	if err != nil {
		return nil, err
	}
	var started []string
	for _, v := range vols {
		if v.Layout.Checksum == "" || v.State != meta.VolumeReady {
			continue
		}
		t, err := s.Task(ctx, meta.ScrubTaskID(v.Name))
		if errors.Is(err, meta.ErrNotFound) {
			t, err = nil, nil
		}
		if err != nil {
			return started, err
		}
		mapper, err := s.Mapper(ctx, v.Name)
		if err != nil {
			return started, err
		}
		if !scrubDue(t, mapper, now, interval) {
			continue
		}
		if mapper == "" {
			if err := endOrphan(ctx, s, t); err != nil {
				return started, err
			}
			continue // not mapped read-write
		}
		if _, err := s.StartScrub(ctx, v.Name); errors.Is(err, meta.ErrInvalid) {
			continue // unmapped meanwhile
		} else if err != nil {
			return started, err
		}
		started = append(started, v.Name)
	}
	return started, nil
}

// endOrphan ends a scrub t still running at a holder that maps its volume
// no more, as failed without an end time: it is due again as soon as the
// volume is mapped read-write.
func endOrphan(ctx context.Context, s *meta.Store, t *meta.TaskRecord) error {
	if t == nil || t.State != meta.TaskRunning {
		return nil
	}
	t.State = meta.TaskFailed
	t.Error = fmt.Sprintf("%s no longer maps volume %s read-write at segment %d of %d; the scrub starts again when it is mapped", t.Holder, t.Volume, t.Done, t.Total)
	return s.PutTask(ctx, t)
}

// scheduleScrubs runs startDueScrubs every check until ctx ends.
func scheduleScrubs(ctx context.Context, s *meta.Store, interval, check time.Duration, logf func(string, ...any)) {
	tick := time.NewTicker(check)
	defer tick.Stop()
	for {
		started, err := startDueScrubs(ctx, s, time.Now(), interval)
		if err != nil && ctx.Err() == nil {
			logf("scrub schedule: %v", err)
		}
		for _, v := range started {
			logf("volume %s: scrub started (last one %s ago or more)", v, interval)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
