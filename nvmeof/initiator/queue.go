package initiator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/rawsock"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
	"github.com/nvstripe/nvstripe/nvmeof/tlspsk"
)

// dataDir is the direction of a command's data.
type dataDir uint8

const (
	dirNone dataDir = iota
	dirH2C          // host to controller: writes, in-capsule or after R2T
	dirC2H          // controller to host: reads, in C2HData
)

// request is one command to run on a queue.
type request struct {
	op  string // for errors
	sqe pdu.SQE
	// data is the write data (dirH2C) or the buffer reads land in (dirC2H).
	data []byte
	dir  dataDir
	// inCapsule sends the write data inside the command capsule.
	inCapsule bool
	// noTimeout exempts the command from IOTimeout (Async Event Request).
	noTimeout bool
}

// slot is the state of one command tag.
//
// Ownership: the submitter fills the request fields and sets active under
// q.mu; from then on the reader goroutine owns rcvd/r2tEnd and the buffer
// (for reads) until it clears active under q.mu, stores cqe/err and signals
// done. The submitter then reads cqe/err and returns the tag.
type slot struct {
	active    bool
	cid       uint16
	dir       dataDir
	buf       []byte
	inCapsule bool
	icDigest  uint32
	sqe       pdu.SQE
	start     time.Time
	noTimeout bool

	rcvd    int   // C2H bytes received (reader)
	r2tEnd  int   // end of the data requested by R2Ts so far (reader)
	xferErr error // data digest failure seen by the reader

	cqe  pdu.CQE
	err  error
	done chan struct{}
}

// outKind says what an outItem sends.
type outKind uint8

const (
	outCapsule outKind = iota // the CapsuleCmd of slot tag (with in-capsule data)
	outH2C                    // one H2CData PDU
)

// outItem is one PDU waiting for the writer. Data bytes are never read by
// Go code in the writer: their digest is computed by whoever queues the
// item, and the bytes go to the kernel in writev.
type outItem struct {
	kind  outKind
	tag   uint16
	hdr   pdu.DataHdr // outH2C
	last  bool        // outH2C: LAST_PDU
	data  []byte      // outH2C
	ddgst uint32      // outH2C data digest
}

// queue is one NVMe/TCP connection: the admin queue (qid 0) or an I/O
// queue. Many commands run on it at once; one reader goroutine completes
// them and whoever finds the writer idle sends queued PDUs in one writev.
type queue struct {
	addr     string
	qid      uint16
	conn     net.Conn
	raw      *rawsock.Conn // conn's raw reads and writev; nil for TLS and wrapped connections
	dg       pdu.Digests
	maxH2C   int
	tags     *tagPool
	slots    []slot
	inflight atomic.Int32
	// r2ts and h2cPDUs count R2Ts received and H2CData PDUs queued (tests
	// and diagnostics).
	r2ts, h2cPDUs atomic.Uint64
	// successes counts reads completed by a C2HData SUCCESS flag.
	successes atomic.Uint64

	mu      sync.Mutex
	idle    *sync.Cond // signalled when writing goes false
	pending []outItem
	spare   []outItem
	writing bool
	dead    bool
	err     error
	deadCh  chan struct{}
	kick    chan struct{}

	// writer-owned scratch (only the goroutine holding writing touches it)
	hbuf  []byte
	marks []iovMark
	iov   [][]byte
	wbufs net.Buffers

	// tok is the reader token: whoever holds it reads PDUs from the
	// connection and completes commands (leader/followers: a waiting
	// submitter reads for everyone, so a lone command needs no goroutine
	// handoff). br and hdr belong to the holder.
	tok chan struct{}
	br  *pduReader
	hdr []byte
	// onDead, set before start, is called once when the queue fails.
	onDead func(error)
	// beforeHandOff, when set, runs after the reader queued PDUs and took
	// the writing role, before it hands the role on (tests).
	beforeHandOff func()
}

type iovMark struct {
	hdrStart, hdrEnd, dgEnd int
	data                    []byte
}

// dialQueue opens a TCP connection to addr and exchanges ICReq/ICResp. The
// queue is not started; call start.
func dialQueue(ctx context.Context, o *Options, addr string, qid uint16, depth int) (*queue, error) {
	conn, err := o.Dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, blockdev.Mark(fmt.Errorf("nvme/tcp %s: dial: %w", addr, err), blockdev.ErrUnavailable)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	raw := conn
	if conn, err = startTLS(ctx, o, conn, addr); err != nil {
		raw.Close()
		return nil, err
	}
	q := newQueue(conn, addr, qid, depth, pdu.Digests{Header: o.HeaderDigest, Data: o.DataDigest})
	if err := q.handshake(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

func newQueue(conn net.Conn, addr string, qid uint16, depth int, dg pdu.Digests) *queue {
	q := &queue{
		addr: addr, qid: qid, conn: conn, dg: dg,
		slots:  make([]slot, depth),
		deadCh: make(chan struct{}),
		kick:   make(chan struct{}, 1),
		tok:    make(chan struct{}, 1),
		hdr:    make([]byte, pdu.MaxHeaderLen),
	}
	q.tok <- struct{}{}
	q.idle = sync.NewCond(&q.mu)
	q.tags = newTagPool(depth, q.deadCh)
	for i := range q.slots {
		q.slots[i].done = make(chan struct{}, 1)
	}
	return q
}

// handshake sends ICReq and checks ICResp the way the Linux host does. It
// gives up when ctx ends, by its deadline or cancelled.
func (q *queue) handshake(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = q.conn.SetDeadline(dl)
		defer q.conn.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { _ = q.conn.SetDeadline(time.Now()) })
	err := q.exchangeIC()
	if !stop() { // ctx ended: the connection's deadline may be cut short
		cause := context.Cause(ctx)
		if errors.Is(cause, context.DeadlineExceeded) {
			// a target answers ICReq at once: a silent peer is no target
			return blockdev.Mark(&NotNVMeError{Addr: q.addr, Err: fmt.Errorf("no ICResp before the connect timeout: %w", cause)},
				blockdev.ErrUnavailable)
		}
		return q.connErr("ICReq", cause)
	}
	return err
}

// exchangeIC sends ICReq and reads and checks ICResp.
func (q *queue) exchangeIC() error {
	req := pdu.ICReq{HPDA: 0, Digests: q.dg, MaxR2T: 0}
	if _, err := q.conn.Write(req.Append(nil)); err != nil {
		return q.connErr("send ICReq", err)
	}
	hdr := make([]byte, pdu.MaxHeaderLen)
	h, err := pdu.ReadHeader(q.conn, hdr, pdu.Digests{}, 0)
	if err == nil && h.Type != pdu.TypeICResp {
		err = fmt.Errorf("got %v: %w", h.Type, pdu.ErrProtocol)
	}
	if err != nil && notNVMe(err) {
		return blockdev.Mark(&NotNVMeError{Addr: q.addr, Err: fmt.Errorf("read ICResp: %w", err)}, blockdev.ErrUnavailable)
	}
	if err != nil {
		return q.connErr("read ICResp", err)
	}
	resp := pdu.ParseICResp(hdr)
	switch {
	case resp.PFV != 0:
		err = fmt.Errorf("ICResp PFV %d", resp.PFV)
	case resp.Digests != q.dg:
		err = fmt.Errorf("ICResp digests %+v, asked for %+v", resp.Digests, q.dg)
	case resp.CPDA != 0:
		err = fmt.Errorf("ICResp CPDA %d unsupported", resp.CPDA)
	case resp.MaxH2CData < 4096 || resp.MaxH2CData%4 != 0:
		err = fmt.Errorf("ICResp MAXH2CDATA %d invalid", resp.MaxH2CData)
	}
	if err != nil {
		return q.connErr("ICResp", fmt.Errorf("%w: %w", err, pdu.ErrProtocol))
	}
	q.maxH2C = int(min(resp.MaxH2CData, 1<<30))
	return nil
}

func (q *queue) connErr(what string, err error) error {
	return blockdev.Mark(fmt.Errorf("nvme/tcp %s qid %d: %s: %w: %w", q.addr, q.qid, what, errTransport, err),
		blockdev.ErrUnavailable)
}

// start runs the writer goroutine and readies the reader.
func (q *queue) start() {
	q.raw = rawsock.New(q.conn)
	q.br = newPDUReader(q.conn, q.raw)
	go q.writeLoop()
}

// quiesce waits until no goroutine is reading the connection. After the
// queue failed, nothing reads it again.
func (q *queue) quiesce() {
	<-q.tok
	q.tok <- struct{}{}
}

// fail kills the queue: the connection is closed, every command in flight
// and every later one fails with a transport error. Safe to call many times.
func (q *queue) fail(err error) {
	q.mu.Lock()
	if q.dead {
		q.mu.Unlock()
		return
	}
	q.dead = true
	q.err = q.connErr("connection lost", err)
	close(q.deadCh)
	q.mu.Unlock()
	q.conn.Close()
	if q.onDead != nil {
		q.onDead(err)
	}
}

// deadErr returns the error commands fail with once the queue is dead.
func (q *queue) deadErr() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// do runs r and waits for its completion. ctx bounds waiting for a free
// tag; once the command is on the wire it completes, fails with the queue,
// or is failed by the IO timeout watchdog (which resets the connection).
// On success the CQE is returned; a nonzero NVMe status is a *StatusError.
func (q *queue) do(ctx context.Context, r *request) (pdu.CQE, error) {
	tag, cid, err := q.tags.get(ctx)
	if err != nil {
		if errors.Is(err, errQueueClosed) {
			return pdu.CQE{}, q.deadErr()
		}
		return pdu.CQE{}, err
	}
	q.inflight.Add(1)
	s := &q.slots[tag]
	if err := q.submit(s, tag, cid, r); err != nil {
		q.inflight.Add(-1)
		q.tags.put(tag)
		return pdu.CQE{}, err
	}
	q.await(s)
	cqe, err := s.cqe, s.err
	s.buf = nil
	q.inflight.Add(-1)
	q.tags.put(tag)
	if err != nil {
		return cqe, err
	}
	if !cqe.Status.Success() {
		return cqe, statusErr(r.op, cqe.Status)
	}
	return cqe, nil
}

// submit registers the command in its slot and queues its capsule.
func (q *queue) submit(s *slot, tag, cid uint16, r *request) error {
	s.sqe = r.sqe
	s.sqe.CID = cid
	s.cid, s.dir, s.buf, s.inCapsule, s.noTimeout = cid, r.dir, r.data, r.inCapsule, r.noTimeout
	s.rcvd, s.r2tEnd, s.err, s.cqe, s.xferErr = 0, 0, nil, pdu.CQE{}, nil
	s.icDigest = 0
	if r.inCapsule && q.dg.Data && len(r.data) > 0 {
		s.icDigest = pdu.Digest(r.data)
	}
	q.mu.Lock()
	if q.dead {
		err := q.err
		q.mu.Unlock()
		return err
	}
	s.start = time.Now()
	s.active = true
	return q.enqueueLocked(outItem{kind: outCapsule, tag: tag}, true)
}

// enqueueLocked appends items to the send queue and, when no one is
// writing, either writes them now (inline, in the caller's goroutine) or
// wakes the writer goroutine. REQUIRES: q.mu held; it is released.
func (q *queue) enqueueLocked(it outItem, inline bool) error {
	q.pending = append(q.pending, it)
	if q.writing {
		q.mu.Unlock()
		return nil
	}
	q.writing = true
	q.mu.Unlock()
	if inline {
		q.flush()
		return nil
	}
	if q.beforeHandOff != nil {
		q.beforeHandOff()
	}
	q.handOff()
	return nil
}

// handOff passes the writing role to the writer goroutine; on a dead queue,
// whose writer may have exited already, it gives the role up (nothing is
// sent on a dead queue), so that sweep does not wait for it forever.
// REQUIRES: the caller holds the writing role.
func (q *queue) handOff() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dead {
		q.pending = q.pending[:0]
		q.writing = false
		q.idle.Broadcast()
		return
	}
	// Kicked under q.mu while the queue lives: once the writer has seen
	// the queue dead, every hand-off it must take is in the channel.
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// writeLoop flushes the send queue when handed the writing role by the
// reader (which must never block on the socket).
func (q *queue) writeLoop() {
	for {
		select {
		case <-q.kick:
			q.flush()
		case <-q.deadCh:
			select {
			case <-q.kick: // handed the role before the queue died
				q.flush() // gives it up: nothing is sent on a dead queue
			default:
			}
			q.mu.Lock()
			for q.writing {
				q.idle.Wait()
			}
			q.mu.Unlock()
			return
		}
	}
}

// flush sends queued PDUs until the queue is empty. REQUIRES: the caller
// set q.writing.
func (q *queue) flush() {
	for {
		q.mu.Lock()
		if q.dead || len(q.pending) == 0 {
			q.pending = q.pending[:0]
			q.writing = false
			q.idle.Broadcast()
			q.mu.Unlock()
			return
		}
		batch := q.pending
		q.pending = q.spare[:0]
		q.encodeLocked(batch)
		q.spare = batch[:0]
		q.mu.Unlock()
		if err := q.writeIOV(); err != nil {
			q.fail(fmt.Errorf("write: %w", err))
		}
	}
}

// writeIOV sends q.iov: with raw writev calls on a plain TCP connection
// (see package rawsock), through the connection otherwise (TLS records).
// REQUIRES: q.writing owned.
func (q *queue) writeIOV() error {
	if q.raw != nil {
		return q.raw.Writev(q.iov)
	}
	q.wbufs = q.iov
	_, err := tlspsk.WriteBuffers(q.conn, &q.wbufs)
	return err
}

// encodeLocked builds the headers of batch into q.hbuf and the iovecs in
// q.iov. REQUIRES: q.mu held (it reads slot SQEs) and q.writing owned.
func (q *queue) encodeLocked(batch []outItem) {
	q.hbuf, q.marks = q.hbuf[:0], q.marks[:0]
	for i := range batch {
		it := &batch[i]
		m := iovMark{hdrStart: len(q.hbuf)}
		var dgst uint32
		switch it.kind {
		case outCapsule:
			s := &q.slots[it.tag]
			if s.inCapsule {
				m.data, dgst = s.buf, s.icDigest
			}
			q.hbuf = appendCapsuleHdr(q.hbuf, &s.sqe, len(m.data), q.dg)
		case outH2C:
			var fl pdu.Flags
			if it.last {
				fl = pdu.FlagLastPDU
			}
			m.data, dgst = it.data, it.ddgst
			q.hbuf = pdu.AppendDataHdr(q.hbuf, pdu.TypeH2CData, fl, it.hdr, q.dg)
		}
		m.hdrEnd = len(q.hbuf)
		if q.dg.Data && len(m.data) > 0 {
			q.hbuf = append(q.hbuf, byte(dgst), byte(dgst>>8), byte(dgst>>16), byte(dgst>>24))
		}
		m.dgEnd = len(q.hbuf)
		q.marks = append(q.marks, m)
	}
	q.buildIOV()
}

// buildIOV turns q.marks into iovecs, merging header bytes that follow each
// other in q.hbuf into one iovec.
func (q *queue) buildIOV() {
	q.iov = q.iov[:0]
	last := -1 // end offset in hbuf of the last iovec when it is hbuf bytes
	add := func(from, to int) {
		if from == to {
			return
		}
		if last == from {
			n := len(q.iov) - 1
			q.iov[n] = q.hbuf[from-len(q.iov[n]) : to]
		} else {
			q.iov = append(q.iov, q.hbuf[from:to])
		}
		last = to
	}
	for _, m := range q.marks {
		if len(m.data) == 0 {
			add(m.hdrStart, m.dgEnd)
			continue
		}
		add(m.hdrStart, m.hdrEnd)
		q.iov = append(q.iov, m.data)
		last = -1
		add(m.hdrEnd, m.dgEnd)
	}
}

// await waits for s to complete. While it waits it may take the reader
// token and read for every command of the queue until s completes.
func (q *queue) await(s *slot) {
	for {
		select {
		case <-s.done:
			return
		case <-q.tok:
			q.lead(s)
		}
	}
}

// lead reads PDUs and completes commands until s has completed or the
// connection fails (then every command in flight fails), and passes the
// reader token on. REQUIRES: the token is held.
func (q *queue) lead(s *slot) {
	defer func() { q.tok <- struct{}{} }()
	for len(s.done) == 0 {
		if err := q.readOne(q.br, q.hdr); err != nil {
			q.fail(err)
			q.sweep()
			return
		}
	}
}

// sweep fails every command still in flight on a dead queue.
func (q *queue) sweep() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.writing {
		q.idle.Wait()
	}
	for i := range q.slots {
		s := &q.slots[i]
		if s.active {
			s.active = false
			s.err = q.err
			s.done <- struct{}{}
		}
	}
}

// readOne reads and handles one PDU.
func (q *queue) readOne(br *pduReader, hdr []byte) error {
	h, err := pdu.ReadHeader(br, hdr, q.dg, -1)
	if err != nil {
		return err
	}
	switch h.Type {
	case pdu.TypeCapsuleResp:
		cqe := pdu.ParseCapsuleResp(hdr)
		return q.complete(cqe.CID, cqe, nil)
	case pdu.TypeC2HData:
		return q.recvData(br, h, pdu.ParseDataHdr(hdr))
	case pdu.TypeR2T:
		return q.recvR2T(pdu.ParseR2T(hdr))
	case pdu.TypeC2HTermReq:
		data := make([]byte, h.DataLen())
		if err := pdu.ReadData(br, h, data); err != nil {
			return err
		}
		t := pdu.ParseTermReq(hdr, data)
		return fmt.Errorf("controller sent C2HTermReq fes 0x%x fei 0x%x: %w", t.FES, t.FEI, pdu.ErrProtocol)
	}
	return fmt.Errorf("unexpected %v from controller: %w", h.Type, pdu.ErrProtocol)
}

// lookup returns the active slot for cid. REQUIRES: q.mu held.
func (q *queue) lookupLocked(cid uint16) (*slot, error) {
	tag := tagOf(cid)
	if int(tag) >= len(q.slots) || !q.slots[tag].active || q.slots[tag].cid != cid {
		return nil, fmt.Errorf("pdu for unknown command id 0x%04x: %w", cid, pdu.ErrProtocol)
	}
	return &q.slots[tag], nil
}

// complete finishes the command cid with cqe (or err).
func (q *queue) complete(cid uint16, cqe pdu.CQE, err error) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	s, lerr := q.lookupLocked(cid)
	if lerr != nil {
		return lerr
	}
	if err == nil && s.xferErr != nil {
		err = s.xferErr
	} else if err == nil && cqe.Status.Success() && s.dir == dirC2H && s.rcvd != len(s.buf) {
		return fmt.Errorf("read cid 0x%04x completed after %d of %d bytes: %w", cid, s.rcvd, len(s.buf), pdu.ErrProtocol)
	}
	s.active = false
	s.cqe, s.err = cqe, err
	s.done <- struct{}{}
	return nil
}

// recvData reads a C2HData PDU straight into the command's buffer.
func (q *queue) recvData(br *pduReader, h pdu.Header, d pdu.DataHdr) error {
	q.mu.Lock()
	s, err := q.lookupLocked(d.CCCID)
	q.mu.Unlock()
	if err != nil {
		return err
	}
	end := int64(d.DataO) + int64(d.DataL)
	if s.dir != dirC2H || int(d.DataO) != s.rcvd || end > int64(len(s.buf)) || int(d.DataL) != h.DataLen() {
		return fmt.Errorf("C2HData cid 0x%04x off %d len %d does not fit (received %d of %d): %w",
			d.CCCID, d.DataO, d.DataL, s.rcvd, len(s.buf), pdu.ErrProtocol)
	}
	derr := readData(br, h, s.buf[d.DataO:end])
	if derr != nil && !errors.Is(derr, pdu.ErrDataDigest) {
		return derr
	}
	s.rcvd = int(end)
	if derr != nil {
		// The stream is still in step: fail only this command, as a
		// retryable transfer error, when the controller completes it.
		s.xferErr = statusErr("read", pdu.MakeStatus(pdu.SCDataTransferError, false))
	}
	if h.Flags&pdu.FlagSuccess != 0 {
		if end != int64(len(s.buf)) {
			return fmt.Errorf("C2HData SUCCESS before all data: %w", pdu.ErrProtocol)
		}
		q.successes.Add(1)
		return q.complete(d.CCCID, pdu.CQE{CID: d.CCCID, SQID: q.qid}, nil)
	}
	return nil
}

// recvR2T queues the H2CData PDUs an R2T asks for, at most maxH2C bytes
// each. It never blocks on the socket.
func (q *queue) recvR2T(r pdu.R2T) error {
	q.mu.Lock()
	s, err := q.lookupLocked(r.CCCID)
	if err != nil {
		q.mu.Unlock()
		return err
	}
	end := int64(r.R2TO) + int64(r.R2TL)
	if s.dir != dirH2C || s.inCapsule || r.R2TL == 0 || int(r.R2TO) < s.r2tEnd || end > int64(len(s.buf)) {
		q.mu.Unlock()
		return fmt.Errorf("R2T cid 0x%04x off %d len %d invalid for a %d-byte write: %w",
			r.CCCID, r.R2TO, r.R2TL, len(s.buf), pdu.ErrProtocol)
	}
	s.r2tEnd = int(end)
	buf := s.buf
	q.mu.Unlock()
	q.r2ts.Add(1)
	items := make([]outItem, 0, (int(r.R2TL)+q.maxH2C-1)/q.maxH2C)
	for off := int(r.R2TO); off < int(end); off += q.maxH2C {
		n := min(q.maxH2C, int(end)-off)
		it := outItem{kind: outH2C, data: buf[off : off+n], last: off+n == int(end),
			hdr: pdu.DataHdr{CCCID: r.CCCID, TTAG: r.TTAG, DataO: uint32(off), DataL: uint32(n)}}
		if q.dg.Data {
			it.ddgst = pdu.Digest(it.data)
		}
		items = append(items, it)
	}
	q.mu.Lock()
	if q.dead {
		q.mu.Unlock()
		return nil
	}
	q.h2cPDUs.Add(uint64(len(items)))
	q.pending = append(q.pending, items[:len(items)-1]...)
	return q.enqueueLocked(items[len(items)-1], false)
}

// checkTimeout fails the queue when a command has been in flight longer
// than limit.
func (q *queue) checkTimeout(now time.Time, limit time.Duration) {
	q.mu.Lock()
	var late bool
	for i := range q.slots {
		s := &q.slots[i]
		if s.active && !s.noTimeout && now.Sub(s.start) > limit {
			late = true
			break
		}
	}
	q.mu.Unlock()
	if late {
		q.fail(fmt.Errorf("command timed out after %v", limit))
	}
}

// appendCapsuleHdr appends a CapsuleCmd header (and header digest) for a
// command with dataLen bytes of in-capsule data; the same encoding as
// pdu.AppendCapsuleCmdHdr, without its per-call allocation.
func appendCapsuleHdr(b []byte, sqe *pdu.SQE, dataLen int, dg pdu.Digests) []byte {
	n := len(b)
	b = append(b, make([]byte, pdu.CapsuleCmdLen)...)
	h := pdu.Header{Type: pdu.TypeCapsuleCmd, HLen: pdu.CapsuleCmdLen}
	hdrEnd := pdu.CapsuleCmdLen
	if dg.Header {
		h.Flags |= pdu.FlagHDGST
		hdrEnd += pdu.DigestLen
	}
	h.PLen = uint32(hdrEnd + dataLen)
	if dataLen > 0 {
		h.PDO = uint8(hdrEnd)
		if dg.Data {
			h.Flags |= pdu.FlagDDGST
			h.PLen += pdu.DigestLen
		}
	}
	h.Put(b[n:])
	sqe.Put(b[n+pdu.CommonHeaderLen:])
	if dg.Header {
		b = binary.LittleEndian.AppendUint32(b, pdu.Digest(b[n:]))
	}
	return b
}

// readData reads the data of a C2HData PDU into dst like pdu.ReadData, but
// without allocating when there is no padding (the common case), and
// straight into dst.
func readData(br *pduReader, h pdu.Header, dst []byte) error {
	if h.PadLen() != 0 {
		return pdu.ReadData(br, h, dst)
	}
	if err := br.readFull(dst); err != nil {
		return err
	}
	if h.DDigestLen() == 0 {
		return nil
	}
	var d [pdu.DigestLen]byte
	if _, err := io.ReadFull(br, d[:]); err != nil {
		return err
	}
	if got, want := binary.LittleEndian.Uint32(d[:]), pdu.Digest(dst); got != want {
		return &pdu.DataDigestError{Got: got, Want: want}
	}
	return nil
}
