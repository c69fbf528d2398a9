package controllerd

import (
	"context"
	"errors"
	"time"

	"github.com/nvstripe/nvstripe/meta"
)

// scrubDue reports whether volume's scrub, last recorded as t (nil: none),
// should start again at now: none has run, or the last ended (done or
// failed) interval ago or longer. A running one is never due.
func scrubDue(t *meta.TaskRecord, now time.Time, interval time.Duration) bool {
	if t == nil {
		return true
	}
	if t.State == meta.TaskRunning {
		return false
	}
	ended, err := time.Parse(time.RFC3339, t.Ended)
	return err != nil || now.Sub(ended) >= interval
}

// startDueScrubs starts the scrub of every checksummed volume mapped
// read-write whose last scrub is older than interval, and returns the
// volumes it started. An unmapped volume waits until it is mapped: the
// owner runs its scrub.
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
		if !scrubDue(t, now, interval) {
			continue
		}
		if _, err := s.StartScrub(ctx, v.Name); errors.Is(err, meta.ErrInvalid) {
			continue // not mapped read-write
		} else if err != nil {
			return started, err
		}
		started = append(started, v.Name)
	}
	return started, nil
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
