package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/internal/retry"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volclient"
)

// reacquireTimeout bounds one attempt to take a fenced volume again.
const reacquireTimeout = 30 * time.Second

// reacquire runs once the mapping is fenced (its lease ran out, typically
// while etcd could not be reached): it takes the volume again with a new
// epoch (volclient.Reopen, through OpenVolume) as soon as etcd answers, and
// serves it again through the same frontend. When another owner took the
// volume meanwhile, or nobody can tell, it gives up and the mapping stays
// fenced, saying why. It ends when the mapping is stopped.
func (mp *mapping) reacquire(old *volclient.Mapped, cause error, done chan<- struct{}) {
	defer close(done)
	waits := retry.NewBackoff(retry.Options{Initial: mp.a.o.RetryInterval, Max: 10 * time.Second})
	for delay := waits.Next(); ; {
		if retry.Sleep(mp.openCtx, delay) != nil {
			return
		}
		mp.opMu.Lock()
		err := mp.openCtx.Err()
		if err == nil {
			err = mp.reopenLocked(old)
		}
		stopped := mp.openCtx.Err() != nil
		mp.opMu.Unlock()
		if err == nil || stopped {
			return
		}
		if permanent(err) {
			mp.mu.Lock()
			mp.gaveUp = true
			mp.setStateLocked(api.StateFenced, fmt.Errorf("%w; not taken again: %w", cause, err))
			mp.mu.Unlock()
			mp.a.logf("agent: %s stays fenced: %v", mp.name, err)
			return
		}
		mp.setState(api.StateFenced, fmt.Errorf("%w; taking it again: %w", cause, err))
		delay = waits.Next()
		mp.a.logf("agent: %s: taking it again: %v (retrying in %v)", mp.name, err, delay)
	}
}

// permanent says whether a failed reopen is worth no retry.
func permanent(err error) bool {
	return errors.Is(err, volclient.ErrTakenOver) || errors.Is(err, meta.ErrCompacted) ||
		errors.Is(err, meta.ErrNotFound) || errors.Is(err, meta.ErrBusy)
}

// reopenLocked takes the volume again and serves it from the existing
// frontend. REQUIRES: mp.opMu held.
func (mp *mapping) reopenLocked(old *volclient.Mapped) error {
	ctx, cancel := context.WithTimeout(mp.openCtx, reacquireTimeout)
	defer cancel()
	spec := mp.currentSpec()
	mp.mu.Lock()
	tasksDone := mp.tasksDone
	mp.mu.Unlock()
	if tasksDone != nil {
		<-tasksDone // stopped when the mapping was fenced
	}
	m, err := volclient.Reopen(ctx, mp.a.o.Store, old, mp.openOptions(spec))
	if err != nil {
		return err
	}
	stop, done := make(chan struct{}), make(chan struct{})
	mp.mu.Lock()
	mp.dev.serveAgain(m.Volume)
	mp.opened, mp.stopWatch, mp.watchDone = m, stop, done
	mp.setStateLocked(api.StateServing, nil)
	dev, pacer := mp.dev, mp.pacer
	mp.mu.Unlock()
	mp.a.metrics.epoch.WithLabelValues(spec.Volume).Set(float64(m.Owner.Epoch()))
	mp.a.logf("agent: %s taken again after its lease was lost (epoch %d, was %d): serving again", spec.Volume, m.Owner.Epoch(), old.Owner.Epoch())
	if !spec.ReadOnly {
		mp.serveTasks(m, pacer)
	}
	go mp.watch(m, dev, stop, done)
	return nil
}

// fencedForGood returns why the mapping is fenced and will stay so, or nil
// (serving, or fenced but taking its volume again).
func (mp *mapping) fencedForGood() error {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	if mp.state == api.StateFenced && mp.gaveUp {
		return mp.err
	}
	return nil
}

// ErrDetached is the class of a mapping whose kernel device was disconnected
// or stopped by someone else (nbd-client -d, a ublk STOP_DEV): the volume is
// no longer served.
var ErrDetached = errors.New("kernel device detached by someone else")

// detached returns an ErrDetached error when the mapping's frontend stopped
// serving by itself, else nil.
func (mp *mapping) detached() error {
	mp.mu.Lock()
	front := mp.front
	mp.mu.Unlock()
	if front == nil || !isClosed(front.ended()) {
		return nil
	}
	return fmt.Errorf("volume %s: %s no longer served: %w", mp.name, front.url(), ErrDetached)
}
