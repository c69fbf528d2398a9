package target

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvstripe/nvstripe/nvmeof/auth"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
	"github.com/nvstripe/nvstripe/nvmeof/tlspsk"
)

// readBufSize is the size of a connection's read buffer once it has a
// queue; strangerBufSize before (an ICReq and a Connect capsule fit).
// Data that arrives in the buffer with a PDU header is copied once more
// on its way to the command's buffer (the rest is read straight into it),
// so the buffer holds about a hundred command capsules but little data.
const (
	readBufSize     = 8 << 10
	strangerBufSize = 2 << 10
)

// conn is one NVMe/TCP connection: one queue (admin or I/O).
//
// The reader goroutine (serve) owns the read side and the queue state set
// at Connect; admin commands run on it in order, I/O commands through
// their namespace's scheduler (sched.go); every PDU goes out through snd.
type conn struct {
	t      *Target
	l      *listener
	nc     net.Conn
	raw    net.Conn // the accepted connection, under TLS when nc is TLS
	br     *bufio.Reader
	snd    *sender
	ctx    context.Context
	cancel context.CancelFunc
	hdr    [pdu.MaxHeaderLen]byte

	dg      pdu.Digests
	maxData int  // largest data length ReadHeader accepts
	tls     bool // nc is TLS: PDU data is encrypted in user space

	// Set by Connect (reader goroutine only; read by command goroutines
	// after they were started, which orders the accesses).
	ctrl     *controller
	qid      uint16
	sqsize   uint32
	noSQFlow bool
	authx    *auth.CtrlExchange // DH-HMAC-CHAP, for a host with keys
	authed   bool               // authx succeeded: the queue is open
	authErr  error              // the refusal last logged
	queued   bool               // Connect succeeded: counted in Target.queues
	slot     string             // the host NQN this queue is counted under (hostSlots)

	fetched  atomic.Uint32 // commands received, for SQHD
	inflight sync.WaitGroup
	ninfl    atomic.Int32

	mu      sync.Mutex
	xfers   map[uint16]*xfer // by TTAG
	nextTag uint16
}

func (t *Target) newConn(l *listener, nc net.Conn) *conn {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	ctx, cancel := context.WithCancel(t.ctx)
	c := &conn{t: t, l: l, nc: nc, raw: nc, ctx: ctx, cancel: cancel, xfers: map[uint16]*xfer{}}
	_, c.tls = nc.(*tlspsk.Conn)
	c.br = bufio.NewReaderSize(nc, strangerBufSize)
	c.snd = newSender(nc, func() error { return t.waitThawed(ctx, l) }, func(error) { c.close() })
	c.maxData = pdu.ConnectDataLen
	return c
}

// admitted lifts the limits of a connection without a queue once Connect
// made it one: full-size PDUs, the full read buffer, and no deadline, or
// for a host that must authenticate AuthTimeout from now. Runs on the
// reader goroutine between PDUs.
func (c *conn) admitted() {
	var deadline time.Time
	if c.authx != nil && !c.authed {
		deadline = time.Now().Add(c.t.cfg.AuthTimeout)
	}
	c.nc.SetReadDeadline(deadline)
	c.maxData = max(adminInCapsule, c.t.cfg.InCapsuleDataSize, c.t.cfg.MaxH2CData, c.t.cfg.MaxTransferSize)
	pending, _ := c.br.Peek(c.br.Buffered())
	var r io.Reader = c.nc
	if c.snd.raw != nil {
		r = c.snd.raw // raw reads on plain TCP, as the sender's writev (package rawsock)
	}
	if len(pending) > 0 {
		r = io.MultiReader(bytes.NewReader(bytes.Clone(pending)), r)
	}
	c.br = bufio.NewReaderSize(r, readBufSize)
	c.snd.grow()
}

// close tears the connection down from any goroutine.
func (c *conn) close() {
	c.cancel()
	c.nc.Close()
}

func (c *conn) serve() {
	go c.snd.run()
	err := c.handshake()
	// The deadline the handshake set at accept stays until the Connect
	// succeeds: a host that stalls after the ICReq holds no connection
	// past HandshakeTimeout.
	connecting := err == nil
	for err == nil {
		if err = c.t.waitThawed(c.ctx, c.l); err != nil {
			break
		}
		var h pdu.Header
		h, err = pdu.ReadHeader(c.br, c.hdr[:], c.dg, c.maxData)
		if err == nil {
			err = c.handlePDU(h)
		}
		if connecting && c.ctrl != nil {
			connecting = false // admitted set the queue's deadline
		}
	}
	if connecting && isTimeout(err) {
		err = fmt.Errorf("no Connect within %v of accept: %w", c.t.cfg.HandshakeTimeout, err)
	}
	c.finish(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// finish reports err (a TermReq for protocol errors), then tears down.
func (c *conn) finish(err error) {
	var fe *pdu.FatalError
	if errors.As(err, &fe) {
		c.t.logf("nvmeof/target: %s: %v; sending C2HTermReq", c.nc.RemoteAddr(), err)
		c.snd.send(pdu.AppendTermReq(nil, pdu.TypeC2HTermReq, fe.TermReq()), nil, nil, nil)
		c.snd.flushAndClose(2 * time.Second)
	} else if c.ctrl == nil && errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.refuse(RefusedHandshake)
		c.t.logf("nvmeof/target: %s: no Connect within %v; dropped", c.nc.RemoteAddr(), c.t.cfg.HandshakeTimeout)
	} else if c.authx != nil && !c.authed && errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.refuse(RefusedAuthTimeout)
		c.t.logf("nvmeof/target: %s: host %s did not authenticate within %v of Connect; dropped", c, c.ctrl.hostNQN, c.t.cfg.AuthTimeout)
	} else if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && c.ctx.Err() == nil {
		// net.ErrClosed: closed here, as a handshake evicted (pending.go).
		c.t.logf("nvmeof/target: %s: %v", c.nc.RemoteAddr(), err)
	}
	c.close()
	c.handshakeDone()
	if c.queued {
		c.t.queues.Add(-1)
	}
	c.dropQueued()
	c.inflight.Wait()
	c.snd.shutdown()
	c.mu.Lock()
	for tag, x := range c.xfers {
		delete(c.xfers, tag)
		x.cmd.release()
	}
	c.mu.Unlock()
	if c.ctrl != nil {
		c.ctrl.queueGone(c)
	}
	c.releaseHostSlot()
	c.t.removeConn(c)
}

// handshake reads the ICReq and answers with the ICResp. The connection
// then has until HandshakeTimeout after accept to complete a Connect.
func (c *conn) handshake() error {
	c.nc.SetReadDeadline(time.Now().Add(c.t.cfg.HandshakeTimeout))
	h, err := pdu.ReadHeader(c.br, c.hdr[:], pdu.Digests{}, 0)
	if isTimeout(err) {
		return fmt.Errorf("no ICReq within %v: %w", c.t.cfg.HandshakeTimeout, err)
	}
	if err != nil {
		return err
	}
	if h.Type != pdu.TypeICReq {
		return pdu.NewFatalError(pdu.FESSequenceError, 0, c.hdr[:h.HLen], "first pdu is %v, want ICReq", h.Type)
	}
	req := pdu.ParseICReq(c.hdr[:])
	if req.PFV != 0 {
		return pdu.NewFatalError(pdu.FESUnsupportedParameter, 8, c.hdr[:h.HLen], "icreq pfv %d", req.PFV)
	}
	if req.HPDA != 0 {
		return pdu.NewFatalError(pdu.FESUnsupportedParameter, 10, c.hdr[:h.HLen], "icreq hpda %d (only 0 is supported)", req.HPDA)
	}
	c.dg = req.Digests
	resp := pdu.ICResp{Digests: req.Digests, MaxH2CData: uint32(c.t.cfg.MaxH2CData)}
	c.snd.send(resp.Append(nil), nil, nil, nil)
	return nil
}

func (c *conn) handlePDU(h pdu.Header) error {
	switch h.Type {
	case pdu.TypeCapsuleCmd:
		return c.onCapsule(h)
	case pdu.TypeH2CData:
		return c.onH2CData(h)
	case pdu.TypeH2CTermReq:
		data := make([]byte, h.DataLen())
		err := pdu.ReadData(c.br, h, data)
		tr := pdu.ParseTermReq(c.hdr[:], data)
		c.t.logf("nvmeof/target: %s: host sent H2CTermReq fes %d fei %d", c.nc.RemoteAddr(), tr.FES, tr.FEI)
		if err == nil {
			err = io.EOF
		}
		return err
	case pdu.TypeICReq:
		return pdu.NewFatalError(pdu.FESSequenceError, 0, c.hdr[:h.HLen], "second ICReq")
	}
	return pdu.NewFatalError(pdu.FESInvalidHeaderField, pdu.OffType, c.hdr[:h.HLen], "%v is not a host-to-controller pdu", h.Type)
}

// inCapsuleLimit is the in-capsule data limit of this queue for sqe.
func (c *conn) inCapsuleLimit(sqe *pdu.SQE) int {
	if c.qid == 0 || sqe.Opcode == pdu.OpFabrics {
		return max(adminInCapsule, c.t.cfg.InCapsuleDataSize)
	}
	return c.t.cfg.InCapsuleDataSize
}

func (c *conn) onCapsule(h pdu.Header) error {
	cmd := &command{c: c}
	cmd.sqe.Parse(c.hdr[8:pdu.CapsuleCmdLen])
	c.fetched.Add(1)
	if c.ctrl != nil {
		c.ctrl.traffic.Store(true)
	}
	n := h.DataLen()
	if n > c.inCapsuleLimit(&cmd.sqe) || (c.ctrl == nil && !isConnect(&cmd.sqe)) {
		// No buffer: too much data, or a stranger's data for anything
		// but Connect (dispatch refuses it).
		if err := pdu.Discard(c.br, h); err != nil {
			return err
		}
		if c.ctrl == nil && !isConnect(&cmd.sqe) {
			c.dispatch(cmd)
		} else {
			cmd.fail(pdu.SCSGLOffsetInvalid, true)
		}
		return nil
	}
	if n > 0 {
		cmd.buf = c.t.pool.get(n)
		err := pdu.ReadData(c.br, h, cmd.buf)
		if errors.Is(err, pdu.ErrDataDigest) {
			c.t.logf("nvmeof/target: %s: capsule data digest error: %v", c.nc.RemoteAddr(), err)
			cmd.fail(pdu.SCTransientTransport, false)
			return nil
		}
		if err != nil {
			cmd.release()
			return err
		}
		cmd.inCapsule = true
	}
	c.dispatch(cmd)
	return nil
}

// onH2CData receives data for an R2T.
func (c *conn) onH2CData(h pdu.Header) error {
	dh := pdu.ParseDataHdr(c.hdr[:])
	raw := c.hdr[:h.HLen]
	c.mu.Lock()
	x := c.xfers[dh.TTAG]
	c.mu.Unlock()
	switch {
	case x == nil:
		return pdu.NewFatalError(pdu.FESInvalidHeaderField, 10, raw, "h2cdata for unknown ttag %d", dh.TTAG)
	case dh.CCCID != x.cmd.sqe.CID:
		return pdu.NewFatalError(pdu.FESInvalidHeaderField, 8, raw, "h2cdata cccid %#x, r2t was for %#x", dh.CCCID, x.cmd.sqe.CID)
	case int(dh.DataL) != h.DataLen():
		return pdu.NewFatalError(pdu.FESInvalidHeaderField, 16, raw, "h2cdata datal %d but pdu carries %d", dh.DataL, h.DataLen())
	case int(dh.DataL) > c.t.cfg.MaxH2CData:
		return pdu.NewFatalError(pdu.FESDataLimitExceeded, 0, raw, "h2cdata of %d bytes over maxh2cdata", dh.DataL)
	case dh.DataO != x.got || uint64(dh.DataO)+uint64(dh.DataL) > uint64(x.end):
		return pdu.NewFatalError(pdu.FESDataOutOfRange, 0, raw, "h2cdata [%d,+%d) outside the expected [%d,%d)", dh.DataO, dh.DataL, x.got, x.end)
	}
	err := pdu.ReadData(c.br, h, x.cmd.buf[dh.DataO:dh.DataO+dh.DataL])
	if errors.Is(err, pdu.ErrDataDigest) {
		x.digestErr = true
	} else if err != nil {
		return err
	}
	x.got += dh.DataL
	if x.got < x.end {
		if h.Flags&pdu.FlagLastPDU != 0 {
			return pdu.NewFatalError(pdu.FESSequenceError, 0, raw, "LAST_PDU at %d before the r2t end %d", x.got, x.end)
		}
		return nil
	}
	return c.r2tDone(x)
}

// r2tDone continues a transfer whose current R2T is satisfied.
func (c *conn) r2tDone(x *xfer) error {
	if x.got < uint32(len(x.cmd.buf)) {
		c.sendR2T(x)
		return nil
	}
	c.mu.Lock()
	delete(c.xfers, x.tag)
	c.mu.Unlock()
	if x.digestErr {
		x.cmd.fail(pdu.SCTransientTransport, false)
		return nil
	}
	c.execute(x.cmd)
	return nil
}

// xfer is a host-to-controller transfer driven by R2Ts.
type xfer struct {
	cmd       *command
	tag       uint16
	got       uint32 // bytes received
	end       uint32 // end of the current R2T
	digestErr bool
}

// startXfer registers a transfer for cmd (whose buf has the full length)
// and sends its first R2T.
func (c *conn) startXfer(cmd *command) {
	limit := c.maxInflight()
	if c.ctrl == nil {
		limit = 1 // a stranger's Connect
	}
	c.mu.Lock()
	if len(c.xfers) >= limit {
		c.mu.Unlock()
		cmd.fail(pdu.SCTransientTransport, false)
		return
	}
	cmd.buf = c.t.pool.get(int(cmd.sqe.SGL.Length))
	cmd.data = cmd.buf
	x := &xfer{cmd: cmd}
	for {
		x.tag = c.nextTag
		c.nextTag++
		if _, used := c.xfers[x.tag]; !used && x.tag != 0xFFFF {
			break
		}
	}
	c.xfers[x.tag] = x
	c.mu.Unlock()
	c.sendR2T(x)
}

func (c *conn) sendR2T(x *xfer) {
	n := min(uint32(len(x.cmd.buf))-x.got, uint32(c.t.cfg.MaxR2TLength))
	x.end = x.got + n
	r := pdu.R2T{CCCID: x.cmd.sqe.CID, TTAG: x.tag, R2TO: x.got, R2TL: n}
	var b [pdu.R2THdrLen + pdu.DigestLen]byte
	c.snd.send(pdu.AppendR2T(b[:0], r, c.dg), nil, nil, nil)
}

// maxInflight bounds the commands of one queue that hold resources (R2T
// transfers, running I/O): twice the largest queue size, which a host that
// respects its SQ size never reaches.
func (c *conn) maxInflight() int { return 2 * c.t.cfg.QueueSize }

// sqhd is the SQ head pointer for completions of this queue.
func (c *conn) sqhd() uint16 {
	if c.noSQFlow || c.sqsize == 0 {
		return 0xFFFF
	}
	return uint16(c.fetched.Load() % c.sqsize)
}

func (c *conn) String() string {
	return fmt.Sprintf("%s qid %d", c.nc.RemoteAddr(), c.qid)
}
