package initiator

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/nvstripe/nvstripe/internal/retry"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// path is one address of the subsystem. It holds at most one live
// controller; its supervisor goroutine reconnects when that one dies.
type path struct {
	d     *Device
	addr  string
	index int
	ctrl  atomic.Pointer[controller]

	reads, writes, others atomic.Uint64
	readBytes, writeBytes atomic.Uint64
	retries, connects     atomic.Uint64
	lastErr               atomic.Pointer[error]
}

// PathStats is a snapshot of one path.
type PathStats struct {
	Addr string
	// Connected is true while a controller is live on the path.
	Connected bool
	// ANA is the path's ANA state for the namespace (0 when not connected).
	ANA pdu.ANAState
	// Reads, Writes and Others count commands completed successfully on the
	// path; ReadBytes and WriteBytes their data.
	Reads, Writes, Others, ReadBytes, WriteBytes uint64
	// Retries counts commands that failed on this path with a path error and
	// were retried.
	Retries uint64
	// Connects counts successful controller bring-ups.
	Connects uint64
	// LastError is the last connect or path error seen, or nil.
	LastError error
}

func (p *path) stats() PathStats {
	s := PathStats{Addr: p.addr, Reads: p.reads.Load(), Writes: p.writes.Load(), Others: p.others.Load(),
		ReadBytes: p.readBytes.Load(), WriteBytes: p.writeBytes.Load(), Retries: p.retries.Load(),
		Connects: p.connects.Load()}
	if c := p.ctrl.Load(); c != nil && c.alive() {
		s.Connected, s.ANA = true, c.anaState()
	}
	if e := p.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	return s
}

func (p *path) noteErr(err error) { p.lastErr.Store(&err) }

// supervise keeps a controller live on the path until the device closes:
// it runs the controller's housekeeping while it lives and reconnects with
// backoff when it dies. first is the controller Open brought up, or nil.
func (p *path) supervise(first *controller) {
	defer p.d.wg.Done()
	o := &p.d.opts
	c := first
	backoff := retry.NewBackoff(retry.Options{Initial: o.ReconnectBackoff, Max: o.MaxReconnectBackoff})
	for {
		if c != nil {
			p.run(c)
			if p.d.isClosed() {
				return
			}
			backoff.Reset()
		}
		if !p.d.sleep(backoff.Next()) {
			return
		}
		var err error
		c, err = p.connect()
		if err != nil {
			p.noteErr(err)
			o.Logf("nvme/tcp %s: reconnect failed: %v", p.addr, err)
		}
	}
}

// connect brings up a controller and checks that it shows the device's
// namespace.
func (p *path) connect() (*controller, error) {
	o := &p.d.opts
	ctx, cancel := context.WithTimeout(context.Background(), o.ConnectTimeout)
	defer cancel()
	stop := context.AfterFunc(p.d.closeCtx, cancel)
	defer stop()
	c, err := connectController(ctx, o, p.addr, o.SubsysNQN, false)
	if err != nil {
		return nil, err
	}
	c.pathIndex, c.onANA = p.index, p.d.update
	if err := p.d.sameNamespace(c); err != nil {
		c.shutdown(time.Second)
		return nil, err
	}
	return c, nil
}

// run serves IO through c until c dies or the device closes.
func (p *path) run(c *controller) {
	p.connects.Add(1)
	p.ctrl.Store(c)
	p.d.update()
	p.d.opts.Logf("nvme/tcp %s: connected (cntlid %d, %d I/O queues, ANA %v)", p.addr, c.cntlid, len(c.ios), c.anaState())
	done := make(chan struct{})
	go func() { p.asyncEvents(c); close(done) }()
	p.housekeep(c)
	<-done
	p.ctrl.Store(nil)
	p.d.update()
	if p.d.isClosed() {
		c.shutdown(time.Second)
		return
	}
	err := c.deathErr()
	p.noteErr(err)
	p.d.opts.Logf("nvme/tcp %s: path lost: %v", p.addr, err)
	c.wait()
}

// housekeep sends Keep Alive every KATO/3 (a margin over the Linux host's
// KATO/2 against scheduling delays), enforces IOTimeout on every queue,
// and re-reads the ANA log when asked (async event or ANA error) and
// periodically while the path is not optimized. It returns when c dies or
// the device closes (then it shuts c down).
func (p *path) housekeep(c *controller) {
	o := &p.d.opts
	ka := time.NewTicker(o.KATO / 3)
	defer ka.Stop()
	watch := time.NewTicker(max(o.IOTimeout/4, 10*time.Millisecond))
	defer watch.Stop()
	for {
		select {
		case <-c.dead:
			return
		case <-p.d.closed:
			c.shutdown(time.Second)
			return
		case <-c.anaKick:
			p.refreshANA(c)
		case now := <-watch.C:
			for _, q := range append([]*queue{c.admin}, c.ios...) {
				q.checkTimeout(now, o.IOTimeout)
			}
			if c.anaState() != pdu.ANAOptimized {
				p.refreshANA(c)
			}
		case <-ka.C:
			r := &request{op: "keep alive", sqe: pdu.SQE{Opcode: pdu.AdminKeepAlive, Flags: pdu.PSDTSGL,
				SGL: pdu.SGL{ID: pdu.SGLTransport}}}
			if _, err := c.timedAdmin(r, o.KATO); err != nil {
				c.fail(err)
			}
		}
	}
}

func (p *path) refreshANA(c *controller) {
	if c.id.CMIC&pdu.CMICANA == 0 || !c.alive() {
		return
	}
	before := c.anaState()
	t := time.AfterFunc(p.d.opts.IOTimeout, func() { c.fail(errors.New("ANA log read timed out")) })
	err := c.refreshANA(context.Background())
	t.Stop()
	if err != nil {
		p.noteErr(err)
		if isRetryable(err) {
			c.fail(err)
		}
		return
	}
	if c.anaState() != before {
		p.d.update()
	}
}

// asyncEvents keeps one Asynchronous Event Request outstanding and reacts
// to the events: an ANA change re-reads the ANA log; other notices have
// their log page read so the controller re-arms the event.
func (p *path) asyncEvents(c *controller) {
	for c.alive() {
		r := &request{op: "async event request", noTimeout: true,
			sqe: pdu.SQE{Opcode: pdu.AdminAsyncEvent, Flags: pdu.PSDTSGL, SGL: pdu.SGL{ID: pdu.SGLTransport}}}
		cqe, err := c.admin.do(context.Background(), r)
		if err != nil {
			return
		}
		ev := pdu.ParseAEREvent(cqe.DW0)
		p.d.opts.Logf("nvme/tcp %s: async event type %d info 0x%02x log 0x%02x", p.addr, ev.Type, ev.Info, ev.LogPage)
		switch {
		case ev.Type == pdu.AETypeNotice && ev.Info == pdu.AENoticeANAChange:
			select {
			case c.anaKick <- struct{}{}:
			default:
			}
		case ev.LogPage != 0:
			p.clearEvent(c, ev.LogPage)
		}
	}
}

// clearEvent reads (and drops) a log page so the controller can report the
// event type again.
func (p *path) clearEvent(c *controller, lid uint8) {
	g := pdu.GetLogPageCmd{LID: lid, NumD: 1024}
	r := &request{op: "get log page", sqe: g.SQE(0, 0xFFFFFFFF), data: make([]byte, g.Len()), dir: dirC2H}
	_, _ = c.timedAdmin(r, p.d.opts.IOTimeout)
}
