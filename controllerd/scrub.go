package controllerd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nvstripe/nvstripe/meta"
)

// A scrub is started at most once per interval, however many controllers
// run the schedule: each start is conditional on the task record the
// schedule decided from (meta.Store.StartScrubIf, an etcd transaction on the
// record's mod revision). Of controllers that decide from the same record
// one starts the scrub; one that decided from a record that changed since
// (another started the scrub, and its owner may even have ended it) starts
// none and decides again at its next check. Leadership would not give this:
// a deposed leader acts until it notices that its lease is gone, beside the
// new one, so every controller runs the schedule and no handover is needed.

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

// dueScrub is a scrub a schedule pass found due: the volume, who maps it
// read-write ("": nobody) and its scrub task record (nil: none) as read at
// mod revision rev.
type dueScrub struct {
	volume, mapper string
	task           *meta.TaskRecord
	rev            int64
}

// startDueScrubs starts the scrub of every checksummed volume mapped
// read-write whose last scrub is older than interval, and returns the
// volumes it started. An unmapped volume waits until it is mapped: the
// owner runs its scrub. A scrub left running by a holder that no longer
// maps the volume (killed, unmapped, or a mover that never ran it) is
// restarted at the volume's new owner, or ended as failed when there is
// none, so that no task stays running with nobody to run it.
func startDueScrubs(ctx context.Context, s *meta.Store, now time.Time, interval time.Duration) ([]string, error) {
	due, err := dueScrubs(ctx, s, now, interval)
	if err != nil {
		return nil, err
	}
	return startScrubs(ctx, s, due)
}

// dueScrubs reads which scrubs are due at now.
func dueScrubs(ctx context.Context, s *meta.Store, now time.Time, interval time.Duration) ([]dueScrub, error) {
	vols, err := s.Volumes(ctx)
	if err != nil {
		return nil, err
	}
	var due []dueScrub
	for _, v := range vols {
		if v.Layout.Checksum == "" || v.State != meta.VolumeReady {
			continue
		}
		t, rev, err := s.TaskRev(ctx, meta.ScrubTaskID(v.Name))
		if errors.Is(err, meta.ErrNotFound) {
			t, rev, err = nil, 0, nil
		}
		if err != nil {
			return nil, err
		}
		mapper, err := s.Mapper(ctx, v.Name)
		if err != nil {
			return nil, err
		}
		if scrubDue(t, mapper, now, interval) {
			due = append(due, dueScrub{volume: v.Name, mapper: mapper, task: t, rev: rev})
		}
	}
	return due, nil
}

// startScrubs starts each due scrub, or ends it as orphaned when nobody
// maps its volume, unless its task record changed since it was read; it
// returns the volumes started.
func startScrubs(ctx context.Context, s *meta.Store, due []dueScrub) ([]string, error) {
	var started []string
	for _, d := range due {
		if d.mapper == "" {
			if err := endOrphan(ctx, s, d.task, d.rev); err != nil && !errors.Is(err, meta.ErrConflict) {
				return started, err
			}
			continue // not mapped read-write
		}
		_, err := s.StartScrubIf(ctx, d.volume, d.rev)
		switch {
		case errors.Is(err, meta.ErrInvalid), errors.Is(err, meta.ErrConflict):
			continue // unmapped, or started or ended by someone else, meanwhile
		case err != nil:
			return started, err
		}
		started = append(started, d.volume)
	}
	return started, nil
}

// endOrphan ends a scrub t, read at mod revision rev, still running at a
// holder that maps its volume no more, as failed without an end time: it
// is due again as soon as the volume is mapped read-write.
func endOrphan(ctx context.Context, s *meta.Store, t *meta.TaskRecord, rev int64) error {
	if t == nil || t.State != meta.TaskRunning {
		return nil
	}
	t.State = meta.TaskFailed
	t.Error = fmt.Sprintf("%s no longer maps volume %s read-write at segment %d of %d; the scrub starts again when it is mapped", t.Holder, t.Volume, t.Done, t.Total)
	return s.PutTaskIf(ctx, t, rev)
}

// scheduleScrubs runs startDueScrubs every d.scrubCheck until ctx ends.
func (d *Daemon) scheduleScrubs(ctx context.Context) {
	tick := time.NewTicker(d.scrubCheck)
	defer tick.Stop()
	for {
		started, err := startDueScrubs(ctx, d.store, time.Now(), d.scrub)
		if err != nil && ctx.Err() == nil {
			d.logf("scrub schedule: %v", err)
		}
		for _, v := range started {
			d.logf("volume %s: scrub started (last one %s ago or more)", v, d.scrub)
		}
		d.scrubPasses.Add(1)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
