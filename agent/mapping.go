package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/internal/retry"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/qos"
	"github.com/nvstripe/nvstripe/volclient"
	"github.com/nvstripe/nvstripe/volume"
)

// mapping is one volume the agent serves, or is trying to.
//
// Life: starting -> serving (opened: lease held, frontend up) -> fenced when
// the lease is lost; a restored mapping that cannot be opened is retrying
// until it can. stop ends any of these.
type mapping struct {
	a    *Agent
	name string // the volume; never changes
	ev   *volEvents
	// limiter applies the volume's QoS to what the frontend serves (qos.go).
	limiter *qos.Limiter

	// openCtx ends when the mapping is stopped: it aborts open attempts and
	// the retry loop.
	openCtx    context.Context
	cancelOpen context.CancelFunc
	retryDone  chan struct{} // closed when the retry loop ends; nil without one

	// opMu serialises open attempts and stop.
	opMu sync.Mutex

	mu        sync.Mutex
	spec      Spec
	state     string
	err       error
	since     time.Time
	opened    *volclient.Mapped
	dev       *servedDev
	front     frontend
	frontSize int64 // the size the frontend was last told (grow)
	stopWatch chan struct{}
	watchDone chan struct{}
	// stopTasks ends ServeTasks (read-write mappings); tasksDone is closed
	// when it has returned.
	stopTasks context.CancelFunc
	tasksDone chan struct{}
	pacer     *moves.Pacer
	// reacquireDone is closed when the loop that takes a fenced mapping's
	// volume again has ended; nil when none ran. gaveUp is set when it
	// ended without the volume: the mapping stays fenced.
	reacquireDone chan struct{}
	gaveUp        bool
}

func newMapping(a *Agent, spec Spec) *mapping {
	ctx, cancel := context.WithCancel(context.Background())
	mp := &mapping{a: a, name: spec.Volume, spec: spec, openCtx: ctx, cancelOpen: cancel,
		ev: newVolEvents(spec.Volume, a.metrics, a.rep, a.warnDeg), limiter: qos.NewLimiter(qos.Limits{})}
	mp.ev.logf = a.logf
	mp.setState(api.StateStarting, nil)
	return mp
}

// setState records the mapping's state and last error.
func (mp *mapping) setState(state string, err error) {
	mp.mu.Lock()
	mp.setStateLocked(state, err)
	mp.mu.Unlock()
}

// setStateLocked is setState. REQUIRES: mp.mu held.
func (mp *mapping) setStateLocked(state string, err error) {
	if state != mp.state {
		mp.since = time.Now()
	}
	mp.state, mp.err = state, err
	mp.a.metrics.setState(mp.name, state)
}

func (mp *mapping) currentSpec() Spec {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	return mp.spec
}

// openLocked takes ownership, opens the volume and starts serving it.
// REQUIRES: mp.opMu held.
func (mp *mapping) openLocked(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(mp.openCtx, cancel)()
	spec, a := mp.currentSpec(), mp.a
	if err := CheckSpec(spec); err != nil {
		return err
	}
	m, err := volclient.OpenVolume(ctx, a.o.Store, spec.Volume, mp.openOptions(spec))
	if err != nil {
		return err
	}
	pacer, err := moves.NewPacer(a.o.Pacer)
	if err != nil {
		return errors.Join(err, m.Close(context.WithoutCancel(ctx)))
	}
	dev := newServed(m.Volume, a.metrics, spec.Volume, pacer.Observe)
	mp.setQoS(m.Record.QoS)
	front, err := startFrontend(ctx, spec, mp.limitedDev(dev), &a.o)
	if err == nil && mp.openCtx.Err() != nil {
		err = errors.Join(fmt.Errorf("map %s: unmapped while mapping: %w", spec.Volume, api.ErrBusy), front.close())
	}
	if err != nil {
		return errors.Join(err, m.Close(context.WithoutCancel(ctx)))
	}
	stop, done := make(chan struct{}), make(chan struct{})
	mp.mu.Lock()
	mp.spec.Where = front.where()
	mp.opened, mp.dev, mp.front, mp.stopWatch, mp.watchDone, mp.pacer = m, dev, front, stop, done, pacer
	mp.frontSize = m.Volume.Size()
	mp.setStateLocked(api.StateServing, nil)
	mp.mu.Unlock()
	a.metrics.epoch.WithLabelValues(spec.Volume).Set(float64(m.Owner.Epoch()))
	a.logf("%s served at %s (epoch %d)", spec.Volume, front.url(), m.Owner.Epoch())
	if !spec.ReadOnly {
		a.metrics.setUnsettled(spec.Volume, m.Volume)
		mp.serveTasks(m, pacer)
	}
	go mp.watch(m, dev, stop, done)
	return nil
}

// openOptions are the options every open of the mapping's volume uses.
func (mp *mapping) openOptions(spec Spec) volclient.OpenOptions {
	a := mp.a
	return volclient.OpenOptions{
		Holder: a.o.Holder, ReadOnly: spec.ReadOnly, LeaseTTL: a.o.LeaseTTL, Namespaces: a.o.Namespaces,
		Events: volume.TeeListener(mp.ev.listener(), a.o.Events), Logf: a.o.Logf, RecheckInterval: a.o.RecheckInterval,
	}
}

// serveTasks runs the shard moves the controller addresses to this owner
// (Mapped.ServeTasks) until stop. REQUIRES: mp.opMu held.
func (mp *mapping) serveTasks(m *volclient.Mapped, pacer *moves.Pacer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	mp.mu.Lock()
	mp.stopTasks, mp.tasksDone = cancel, done
	mp.mu.Unlock()
	go func() {
		defer close(done)
		m.ServeTasks(ctx, mp.a.o.Store, volclient.TaskOptions{Holder: mp.a.o.Holder, Pacer: pacer, Logf: mp.a.o.Logf, OnMove: moves.Log(mp.a.o.Log)})
	}()
}

// watch fences the mapping when its lease is lost and marks idle segments
// clean every CleanInterval, until stop is closed; meanwhile followSize
// follows the volume's growth.
func (mp *mapping) watch(m *volclient.Mapped, dev *servedDev, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { mp.followSize(ctx, m) })
	tick := time.NewTicker(mp.a.o.CleanInterval)
	defer tick.Stop()
	var seen int64 // writes seen at the last tick
	pending := false
	owner := !mp.currentSpec().ReadOnly // knows the unsettled blocks
	for {
		select {
		case <-stop:
			return
		case <-m.Owner.Context().Done():
			cause := context.Cause(m.Owner.Context())
			dev.fenceLost(cause)
			mp.mu.Lock()
			if mp.stopTasks != nil {
				mp.stopTasks() // no new moves on a fenced volume
			}
			mp.setStateLocked(api.StateFenced, cause)
			if mp.openCtx.Err() == nil {
				mp.reacquireDone = make(chan struct{})
				go mp.reacquire(m, cause, mp.reacquireDone)
			}
			mp.mu.Unlock()
			mp.a.logf("%s fenced: %v; taking it again once etcd answers", m.Record.Name, cause)
			return
		case <-tick.C:
			if owner {
				mp.a.metrics.setUnsettled(m.Record.Name, m.Volume)
			}
			if w := dev.Writes.Load(); w != seen {
				seen, pending = w, true // written since the last tick: not idle
				continue
			}
			if pending {
				pending = !mp.clean(m)
			}
		}
	}
}

// clean marks the idle volume's dirty segments clean; it reports success.
func (mp *mapping) clean(m *volclient.Mapped) bool {
	ctx, cancel := context.WithTimeout(context.Background(), mp.a.o.CleanInterval)
	defer cancel()
	if err := m.Volume.Clean(ctx); err != nil {
		mp.a.logf("%s: marking idle segments clean: %v", m.Record.Name, err)
		return false
	}
	return true
}

// restore opens a persisted mapping, retrying with backoff until it works or
// the mapping is stopped. first is called after the first attempt.
func (mp *mapping) restore(first func()) {
	defer close(mp.retryDone)
	waits := retry.NewBackoff(retry.Options{Initial: mp.a.o.RetryInterval, Max: 30 * time.Second})
	for delay := waits.Next(); ; delay = waits.Next() {
		mp.opMu.Lock()
		err := mp.openCtx.Err()
		if err == nil {
			err = mp.openLocked(mp.openCtx)
		}
		stopped := mp.openCtx.Err() != nil
		if err != nil && !stopped {
			mp.setState(api.StateRetrying, err)
			mp.a.logf("restoring %s: %v (retrying in %v)", mp.name, err, delay)
		}
		mp.opMu.Unlock()
		if first != nil {
			first()
			first = nil
		}
		if err == nil || stopped {
			return
		}
		if retry.Sleep(mp.openCtx, delay) != nil {
			return
		}
	}
}

// stop ends the mapping: aborts open attempts, stops the frontend, then
// flushes the volume, marks it clean and releases the lease. When the
// frontend cannot stop (a FUSE file in use) it fails with stopped false and
// keeps serving. Otherwise the mapping is gone (stopped true) even when
// flushing or releasing failed (err says so; a lease that could not be
// released expires after its TTL). A fenced mapping has no lease to release:
// errors releasing it are only logged.
func (mp *mapping) stop(ctx context.Context) (stopped bool, err error) {
	mp.cancelOpen()
	if mp.retryDone != nil {
		<-mp.retryDone
	}
	mp.mu.Lock()
	reacquiring := mp.reacquireDone
	mp.mu.Unlock()
	if reacquiring != nil {
		<-reacquiring
	}
	mp.opMu.Lock()
	defer mp.opMu.Unlock()
	mp.mu.Lock()
	front, m, stopWatch, done := mp.front, mp.opened, mp.stopWatch, mp.watchDone
	stopTasks, tasksDone := mp.stopTasks, mp.tasksDone
	mp.mu.Unlock()
	if front != nil {
		if err := front.close(); err != nil {
			return false, fmt.Errorf("unmap %s: %w: %w", mp.name, api.ErrBusy, err)
		}
	}
	if stopTasks != nil {
		stopTasks() // a move in progress rolls back
		<-tasksDone
	}
	if stopWatch != nil {
		close(stopWatch)
		<-done
	}
	if m != nil {
		err = m.Close(ctx)
	}
	mp.mu.Lock()
	fenced := mp.state == api.StateFenced
	mp.front, mp.opened, mp.stopWatch, mp.watchDone, mp.stopTasks, mp.tasksDone = nil, nil, nil, nil, nil, nil
	mp.mu.Unlock()
	if err != nil && fenced {
		mp.a.logf("unmapping fenced %s: %v", mp.name, err)
		err = nil
	}
	if err != nil {
		return true, fmt.Errorf("unmapped %s, but: %w", mp.name, err)
	}
	return true, nil
}

// info describes the mapping for List.
func (mp *mapping) info() *api.Mapping {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	out := &api.Mapping{Volume: mp.spec.Volume, Via: string(mp.spec.Via), Where: mp.spec.Where,
		ReadOnly: mp.spec.ReadOnly, State: mp.state, Since: timestamppb.New(mp.since), Holder: mp.a.o.Holder, Stats: &api.Stats{}}
	if mp.err != nil {
		out.Error = mp.err.Error()
	}
	if mp.front != nil {
		out.Url = mp.front.url()
	}
	if mp.opened != nil {
		out.Epoch, out.Size = mp.opened.Owner.Epoch(), mp.opened.Volume.Size()
		out.DownNamespaces = mp.opened.Volume.DownNamespaces()
	}
	out.Health = mp.healthLocked(out.DownNamespaces)
	if d := mp.dev; d != nil {
		out.Stats = &api.Stats{ReadBytes: d.ReadBytes.Load(), WriteBytes: d.WriteBytes.Load(),
			Reads: d.Reads.Load(), Writes: d.Writes.Load(), Errors: d.Errors.Load()}
	}
	out.Stats.Degraded = mp.ev.degraded.Load()
	out.Stats.NamespaceErrors, out.Stats.FailedReported = mp.ev.namespaceErrors()
	return out
}

// healthLocked is the mapping's api.Health* value; down are the namespaces
// its volume treats as down. REQUIRES: mp.mu held.
func (mp *mapping) healthLocked(down []string) string {
	switch {
	case mp.state == api.StateFenced:
		return api.HealthFenced
	case mp.state != api.StateServing:
		return ""
	case mp.front != nil && isClosed(mp.front.ended()):
		return api.HealthDetached
	case len(down) > 0:
		return api.HealthDegraded
	}
	return api.HealthOK
}

// isClosed says whether ch is closed (a nil channel never is).
func isClosed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
