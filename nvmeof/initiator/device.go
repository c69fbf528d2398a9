// Package initiator is a user-space NVMe/TCP host: a blockdev.Device over
// one namespace of an NVMe-oF subsystem, reached through one or more paths
// (listener addresses), with ANA-aware multipathing.
//
// Per path it brings up a controller the way the Linux host does (ICReq,
// fabrics Connect on the admin queue with the dynamic controller ID, CC.EN
// and CSTS.RDY, Identify, Set Features Number of Queues, the ANA log, one
// Async Event Request outstanding, Keep Alive every KATO/2) and opens
// IOQueues I/O queues, each its own TCP connection with QueueDepth commands
// in flight. Reads land directly in the caller's buffer from C2HData
// PDUs; writes travel in the command capsule up to the controller's IOCCSZ
// and through R2T/H2CData (at most MAXH2CDATA per PDU) above it. Header and
// data digests are optional. Outgoing PDUs are batched: whoever finds a
// connection's writer idle sends everything queued in one writev. On plain
// TCP the writev and the reads are raw system calls (package rawsock), and
// a C2HData payload and the next PDU's header come in one readv.
//
// Path choice: IO goes to the live path in ANA state optimized with the
// fewest commands in flight, then to non-optimized paths; inaccessible,
// persistent-loss and change paths are never used. A command that fails
// with a path error (transport failure, SCT 3 status such as the ANA codes
// 0x301-0x303, namespace not ready) is retried on another path; ANA errors
// and ANA-change async events re-read the ANA log. Dead paths reconnect with
// exponential backoff. When no path has been usable for
// ControllerLossTimeout, IO fails with blockdev.ErrUnavailable instead of
// waiting.
//
// Errors carry blockdev classes: LBA out of range is ErrOutOfRange, invalid
// field/opcode/namespace ErrInvalid, reservation conflict and write
// protection ErrFenced, unrecovered read errors ErrCorrupt, everything else
// ErrUnavailable. NVMe statuses are *StatusError values. Only path errors
// are retried; a reservation conflict never is.
//
// Reservations (Register, Acquire, Release, Report, and TakeOver for the
// fencing protocol) act for the host ID the device sends at Connect
// (Options.HostID), so devices opened with distinct host IDs are distinct
// registrants even on one node.
//
// Concurrency: every Device method may be called from many goroutines.
// A context bounds waiting for a path or a free command slot; once a
// command is on the wire it runs until it completes, its connection fails,
// or IOTimeout resets the connection.
package initiator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// Device is a blockdev.Device over an NVMe/TCP namespace.
type Device struct {
	opts   Options
	size   int64
	bs     int
	shift  uint
	ns     nsInfo
	maxXfr int
	caps   ctrlCaps
	paths  []*path

	routes atomic.Pointer[routes]
	rr     atomic.Uint32

	mu            sync.Mutex
	changed       chan struct{} // closed and replaced on every route change
	unusableSince time.Time     // zero while some path is usable

	closed      chan struct{}
	closeCtx    context.Context
	closeCancel context.CancelFunc
	closeOnce   sync.Once
	wg          sync.WaitGroup
}

var (
	_ blockdev.Device    = (*Device)(nil)
	_ blockdev.FUAWriter = (*Device)(nil)
)

// ctrlCaps are the optional commands the first controller advertised.
type ctrlCaps struct {
	dsm, writeZeroes, reservations bool
}

// routes is an immutable snapshot of the usable controllers.
type routes struct {
	optimized, nonOptimized []*controller
}

// Open connects to every path of opts (in parallel) and returns the device
// once at least one path is up. Paths that fail keep reconnecting in the
// background. It fails with blockdev.ErrUnavailable when no path comes up
// and blockdev.ErrInvalid for bad options.
func Open(ctx context.Context, opts Options) (*Device, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	d := &Device{opts: opts, closed: make(chan struct{}), changed: make(chan struct{})}
	d.closeCtx, d.closeCancel = context.WithCancel(context.Background())
	d.routes.Store(&routes{})
	for i, a := range opts.Paths {
		d.paths = append(d.paths, &path{d: d, addr: a, index: i})
	}
	ctrls, errs := d.connectAll(ctx)
	first := -1
	for i, c := range ctrls {
		if c != nil {
			first = i
			break
		}
	}
	if first < 0 {
		d.closeCancel()
		return nil, blockdev.Mark(fmt.Errorf("nvme/tcp %s: no path could connect: %w", opts.SubsysNQN, errors.Join(errs...)),
			blockdev.ErrUnavailable)
	}
	d.adopt(ctrls[first])
	for i, c := range ctrls {
		if c != nil && i != first {
			if err := d.sameNamespace(c); err != nil {
				d.paths[i].noteErr(err)
				c.shutdown(time.Second)
				ctrls[i] = nil
			}
		}
	}
	for i, p := range d.paths {
		p.ctrl.Store(ctrls[i])
	}
	d.update()
	for i, p := range d.paths {
		d.wg.Add(1)
		go p.supervise(ctrls[i])
	}
	return d, nil
}

// connectAll brings up a controller on every path concurrently.
func (d *Device) connectAll(ctx context.Context) ([]*controller, []error) {
	ctrls := make([]*controller, len(d.paths))
	errs := make([]error, len(d.paths))
	var wg sync.WaitGroup
	for i, p := range d.paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, d.opts.ConnectTimeout)
			defer cancel()
			ctrls[i], errs[i] = connectController(cctx, &d.opts, p.addr, d.opts.SubsysNQN, false)
			if errs[i] != nil {
				p.noteErr(errs[i])
				return
			}
			ctrls[i].pathIndex, ctrls[i].onANA = i, d.update
		}()
	}
	wg.Wait()
	return ctrls, errs
}

// adopt takes the namespace geometry from the first controller.
func (d *Device) adopt(c *controller) {
	d.ns, d.size, d.bs, d.maxXfr = c.ns, c.ns.size, c.ns.bs, c.maxXfr
	for d.shift = 0; 1<<d.shift < d.bs; d.shift++ {
	}
	d.caps = ctrlCaps{dsm: c.id.ONCS&pdu.ONCSDSM != 0, writeZeroes: c.id.ONCS&pdu.ONCSWriteZeroes != 0,
		reservations: c.id.ONCS&pdu.ONCSReservations != 0}
}

// sameNamespace checks that c shows the namespace the device was opened on.
func (d *Device) sameNamespace(c *controller) error {
	a, b := d.ns, c.ns
	if a.size != b.size || a.bs != b.bs || a.nguid != b.nguid || a.eui64 != b.eui64 || a.uuid != b.uuid {
		return blockdev.Mark(fmt.Errorf("nvme/tcp %s: namespace %d differs from the other paths' (size %d/%d, block %d/%d, ids)",
			c.addr, d.opts.NSID, b.size, a.size, b.bs, a.bs), blockdev.ErrUnavailable)
	}
	if c.maxXfr < d.maxXfr {
		return blockdev.Mark(fmt.Errorf("nvme/tcp %s: max transfer %d below the device's %d", c.addr, c.maxXfr, d.maxXfr),
			blockdev.ErrUnavailable)
	}
	return nil
}

// update rebuilds the route snapshot after a path or ANA change and wakes
// IO waiting for a path.
func (d *Device) update() {
	r := &routes{}
	for _, p := range d.paths {
		c := p.ctrl.Load()
		if c == nil || !c.alive() {
			continue
		}
		switch c.anaState() {
		case pdu.ANAOptimized:
			r.optimized = append(r.optimized, c)
		case pdu.ANANonOptimized:
			r.nonOptimized = append(r.nonOptimized, c)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.routes.Store(r)
	usable := len(r.optimized)+len(r.nonOptimized) > 0
	if usable {
		d.unusableSince = time.Time{}
	} else if d.unusableSince.IsZero() {
		d.unusableSince = time.Now()
	}
	close(d.changed)
	d.changed = make(chan struct{})
}

// choose returns the usable controller with the fewest commands in flight,
// optimized paths first, avoiding avoid when another is usable.
func (d *Device) choose(avoid *controller) *controller {
	r := d.routes.Load()
	for _, set := range [][]*controller{r.optimized, r.nonOptimized} {
		if c := d.leastBusy(set, avoid); c != nil {
			return c
		}
	}
	if avoid != nil && avoid.alive() && avoid.anaState().Usable() {
		return avoid
	}
	return nil
}

func (d *Device) leastBusy(set []*controller, avoid *controller) *controller {
	n := len(set)
	if n == 0 {
		return nil
	}
	start := int(d.rr.Add(1)) % n
	var best *controller
	var bestN int32
	for i := 0; i < n; i++ {
		c := set[(start+i)%n]
		if c == avoid || !c.alive() || !c.anaState().Usable() {
			continue
		}
		if v := c.inflight.Load(); best == nil || v < bestN {
			best, bestN = c, v
		}
	}
	return best
}

// waitPath returns a usable controller, waiting for one while some path
// has been usable within ControllerLossTimeout.
func (d *Device) waitPath(ctx context.Context, avoid *controller, lastErr error) (*controller, error) {
	for {
		if c := d.choose(avoid); c != nil {
			return c, nil
		}
		d.mu.Lock()
		ch, since := d.changed, d.unusableSince
		d.mu.Unlock()
		if c := d.choose(avoid); c != nil {
			return c, nil
		}
		if d.isClosed() {
			return nil, blockdev.Mark(errors.New("nvme/tcp: device closed"), blockdev.ErrUnavailable)
		}
		if since.IsZero() {
			since = time.Now() // a path just went away; update will set it
		}
		left := time.Until(since.Add(d.opts.ControllerLossTimeout))
		if left <= 0 {
			return nil, d.lossErr(lastErr)
		}
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-d.closed:
		}
		t.Stop()
	}
}

func (d *Device) lossErr(lastErr error) error {
	msg := fmt.Sprintf("nvme/tcp %s nsid %d: no usable path for %v", d.opts.SubsysNQN, d.opts.NSID, d.opts.ControllerLossTimeout)
	if lastErr != nil {
		return blockdev.Mark(fmt.Errorf("%s: %w", msg, lastErr), blockdev.ErrUnavailable)
	}
	var errs []error
	for _, p := range d.paths {
		if s := p.stats(); s.LastError != nil {
			errs = append(errs, s.LastError)
		}
	}
	return blockdev.Mark(fmt.Errorf("%s: %w", msg, errors.Join(errs...)), blockdev.ErrUnavailable)
}

// exec runs r on some path, retrying path errors on other paths until it
// succeeds, fails with a non-path error, or no path has worked for
// ControllerLossTimeout.
func (d *Device) exec(ctx context.Context, r *request, kind opKind) (pdu.CQE, error) {
	var avoid *controller
	var lastErr error
	var firstFail time.Time
	for delay := time.Millisecond; ; {
		c, err := d.waitPath(ctx, avoid, lastErr)
		if err != nil {
			return pdu.CQE{}, err
		}
		if c == avoid {
			// Same path again: give it a moment (namespace not ready, ANA
			// transition) instead of spinning.
			if err := sleepCtx(ctx, delay); err != nil {
				return pdu.CQE{}, err
			}
			delay = min(2*delay, 100*time.Millisecond)
		}
		c.inflight.Add(1)
		cqe, err := c.run(ctx, r)
		p := d.paths[c.pathIndex]
		if err == nil {
			p.count(kind, len(r.data))
			c.inflight.Add(-1)
			return cqe, nil
		}
		c.inflight.Add(-1)
		if !isRetryable(err) || ctx.Err() != nil {
			return cqe, err
		}
		p.retries.Add(1)
		p.noteErr(err)
		c.pathError(err)
		if firstFail.IsZero() {
			firstFail = time.Now()
		} else if time.Since(firstFail) > d.opts.ControllerLossTimeout {
			return cqe, d.lossErr(err)
		}
		avoid, lastErr = c, err
	}
}

// opKind classifies commands for the per-path counters.
type opKind uint8

const (
	kindRead opKind = iota
	kindWrite
	kindOther
)

func (p *path) count(k opKind, n int) {
	switch k {
	case kindRead:
		p.reads.Add(1)
		p.readBytes.Add(uint64(n))
	case kindWrite:
		p.writes.Add(1)
		p.writeBytes.Add(uint64(n))
	default:
		p.others.Add(1)
	}
}

// run sends r on the least busy I/O queue of c, choosing in-capsule or
// R2T transfer for writes by c's limit. The caller accounts c.inflight.
func (c *controller) run(ctx context.Context, r *request) (pdu.CQE, error) {
	if r.dir == dirH2C {
		r.inCapsule = len(r.data) <= c.inCap
		if r.inCapsule {
			r.sqe.SGL = pdu.SGL{ID: pdu.SGLInCapsule, Length: uint32(len(r.data))}
		} else {
			r.sqe.SGL = pdu.SGL{ID: pdu.SGLTransport, Length: uint32(len(r.data))}
		}
	}
	return c.pickQueue().do(ctx, r)
}

// pathError reacts to a path error on c: an ANA status marks the path with
// the state it implies and asks for the ANA log; a command sequence error
// resets the association.
func (c *controller) pathError(err error) {
	var se *StatusError
	if !errors.As(err, &se) {
		return
	}
	if se.Status == pdu.SCCommandSequenceError {
		c.fail(err) // the association is gone: reconnect
		return
	}
	if !se.Status.IsANAError() {
		return
	}
	st := map[pdu.StatusCode]pdu.ANAState{pdu.SCANAPersistentLoss: pdu.ANAPersistentLoss,
		pdu.SCANAInaccessible: pdu.ANAInaccessible, pdu.SCANATransition: pdu.ANAChange}[se.Status]
	if pdu.ANAState(c.ana.Swap(uint32(st))) != st {
		c.onANA()
	}
	select {
	case c.anaKick <- struct{}{}:
	default:
	}
}

// isClosed reports whether Close was called.
func (d *Device) isClosed() bool {
	select {
	case <-d.closed:
		return true
	default:
		return false
	}
}

// sleep waits for dur or until the device closes; false means closed.
func (d *Device) sleep(dur time.Duration) bool {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-d.closed:
		return false
	}
}

// Size returns the namespace size in bytes.
func (d *Device) Size() int64 { return d.size }

// BlockSize returns the namespace's logical block size.
func (d *Device) BlockSize() int { return d.bs }

// Paths returns a snapshot of every path's state and counters.
func (d *Device) Paths() []PathStats {
	out := make([]PathStats, len(d.paths))
	for i, p := range d.paths {
		out[i] = p.stats()
	}
	return out
}

// Close shuts down every controller (CC.SHN, then the connections) and
// waits for the background goroutines. IO after Close fails with
// blockdev.ErrUnavailable.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		close(d.closed)
		d.closeCancel()
		d.wg.Wait()
	})
	return nil
}
