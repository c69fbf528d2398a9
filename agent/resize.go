package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/nvstripe/nvstripe/internal/retry"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volclient"
)

// How a mapping learns that its volume was grown (nvstripe volume resize),
// or given other QoS limits (nvstripe volume set).
//
// followSize reads the volume's record and then watches it from the
// revision of that read (meta.Store.WatchVolume), so that a resize reaches
// the mapping as soon as it commits. etcd delivers every change after that
// revision, in order, or ends the watch with an error (history compacted
// while the agent was cut off, a member without a leader); then the record
// is read again, which applies any resize the watch missed, and watched
// from the new read, after a wait that doubles from sizeRetry to
// sizeRetryMax while etcd does not answer.
//
// A slow poll (Options.sizePoll, default sizePollEvery) reads the record
// besides. It is a safety net for what etcd's watch contract does not
// cover on its own: a watch stream that stays open but silent (an etcd bug,
// or a proxy that keeps the agent's TCP connection up while its far side
// is gone) would otherwise hold a resize back until the mapping is made
// again. It costs one read per mapping every few minutes.
const (
	sizePollEvery = 5 * time.Minute
	sizeRetry     = 100 * time.Millisecond
	sizeRetryMax  = 5 * time.Second
	sizeReadLimit = 10 * time.Second // bounds one read of the record
)

// volumeRecords reads and watches volume records (a meta.Store).
type volumeRecords interface {
	VolumeRev(ctx context.Context, name string) (*meta.VolumeRecord, int64, error)
	WatchVolume(ctx context.Context, name string, fromRev int64) <-chan meta.VolumeEvent
}

// followSize keeps the served volume's size up with its record until ctx
// ends.
func (mp *mapping) followSize(ctx context.Context, m *volclient.Mapped) {
	poll := time.NewTicker(mp.a.o.sizePoll)
	defer poll.Stop()
	waits := retry.NewBackoff(retry.Options{Initial: sizeRetry, Max: sizeRetryMax})
	for {
		rev, err := mp.readSize(ctx, m)
		if err == nil {
			waits.Reset()
			err = mp.watchSize(ctx, m, rev, poll.C)
		}
		if ctx.Err() != nil {
			return
		}
		wait := waits.Next()
		mp.a.logf("%s: following the volume record for resizes: %v; reading it again in %v", mp.name, err, wait)
		if retry.Sleep(ctx, wait) != nil {
			return
		}
	}
}

// readSize reads the volume's record, applies its size and returns the
// revision of the read.
func (mp *mapping) readSize(ctx context.Context, m *volclient.Mapped) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, sizeReadLimit)
	defer cancel()
	rec, rev, err := mp.a.o.records.VolumeRev(rctx, mp.name)
	if err != nil {
		return 0, err
	}
	mp.follow(m, rec)
	return rev, nil
}

// watchSize applies every change of the volume's record after revision
// rev, and reads the record at each poll, until the watch breaks (its
// error is returned) or ctx ends.
func (mp *mapping) watchSize(ctx context.Context, m *volclient.Mapped, rev int64, poll <-chan time.Time) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := mp.a.o.records.WatchVolume(wctx, mp.name, rev)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-events:
			if !ok {
				return fmt.Errorf("watch of the volume record closed")
			}
			if ev.Err != nil {
				return ev.Err
			}
			if ev.Record != nil { // deleted: not while it is mapped (ErrBusy)
				mp.follow(m, ev.Record)
			}
		case <-poll:
			_, _ = mp.readSize(ctx, m) // unreachable etcd: the watch says so
		}
	}
}

// follow applies what the mapping takes from its volume's record: the
// size and the QoS limits.
func (mp *mapping) follow(m *volclient.Mapped, rec *meta.VolumeRecord) {
	mp.grow(m, rec.Size)
	mp.setQoS(rec.QoS)
}

// grow grows the served volume to size bytes when that is larger, and
// tells the frontend once the volume has a size it was not told yet (also
// after a reopen, whose volume starts at the record's size).
func (mp *mapping) grow(m *volclient.Mapped, size int64) {
	if size > m.Volume.Size() {
		m.Map.Grow(size) // first: IO may reach the new end once the volume grows
		if err := m.Volume.Grow(size); err != nil {
			mp.a.logf("%s: growing to %d bytes: %v", mp.name, size, err)
			return
		}
	}
	size = m.Volume.Size()
	mp.mu.Lock()
	front, told, dev := mp.front, mp.frontSize, mp.dev
	mp.mu.Unlock()
	if front == nil || size <= told {
		return
	}
	dev.slot.Resize(size)
	if err := front.resize(size); err != nil {
		mp.a.logf("%s grew from %d to %d bytes, but: %v", mp.name, told, size, err)
	} else {
		mp.a.logf("%s grew from %d to %d bytes: %s has the new size", mp.name, told, size, front.url())
	}
	mp.mu.Lock()
	mp.frontSize = size // told, or refused for good (ublk): not again
	mp.mu.Unlock()
}
