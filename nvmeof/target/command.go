package target

import (
	"math/bits"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// command is one received command. buf is its pooled host-to-controller
// data buffer (in-capsule or gathered through R2Ts); data is the part the
// SGL names.
type command struct {
	c         *conn
	sqe       pdu.SQE
	buf       []byte
	data      []byte
	inCapsule bool
	direct    bool      // runs on its own goroutine: may write to the socket itself
	start     time.Time // I/O commands: when their data was complete
}

// send queues a PDU for the command's connection.
func (cmd *command) send(hdr, data, trailer []byte, release func()) {
	if cmd.direct {
		cmd.c.snd.sendDirect(hdr, data, trailer, release)
	} else {
		cmd.c.snd.send(hdr, data, trailer, release)
	}
}

func (cmd *command) release() {
	if cmd.buf != nil {
		cmd.c.t.pool.put(cmd.buf)
		cmd.buf, cmd.data = nil, nil
	}
}

// complete sends the CapsuleResp.
func (cmd *command) complete(st pdu.Status, dw0, dw1 uint32) {
	c := cmd.c
	cqe := pdu.CQE{DW0: dw0, DW1: dw1, SQHD: c.sqhd(), SQID: c.qid, CID: cmd.sqe.CID, Status: st}
	var b [pdu.CapsuleRespLen + pdu.DigestLen]byte
	cmd.send(pdu.AppendCapsuleResp(b[:0], &cqe, c.dg), nil, nil, nil)
	cmd.release()
}

func (cmd *command) fail(code pdu.StatusCode, dnr bool) {
	cmd.complete(pdu.MakeStatus(code, dnr), 0, 0)
}

func (cmd *command) ok(dw0 uint32) { cmd.complete(0, dw0, 0) }

// completeData sends data in one C2HData PDU and completes the command
// successfully: with the SUCCESS flag when SQ flow control is off (and the
// optimisation is not disabled), else with a CapsuleResp. release runs when
// data has been written.
func (cmd *command) completeData(data []byte, release func()) {
	c := cmd.c
	success := c.noSQFlow && !c.t.cfg.DisableSuccessFlag
	flags := pdu.FlagLastPDU
	if success {
		flags |= pdu.FlagSuccess
	}
	var hb [pdu.DataHdrLen + pdu.DigestLen]byte
	hdr := pdu.AppendDataHdr(hb[:0], pdu.TypeC2HData, flags, pdu.DataHdr{CCCID: cmd.sqe.CID, DataL: uint32(len(data))}, c.dg)
	var tb [pdu.DigestLen + pdu.CapsuleRespLen + pdu.DigestLen]byte
	trailer := tb[:0]
	if c.dg.Data {
		trailer = pdu.AppendDigest(trailer, data)
	}
	if !success {
		cqe := pdu.CQE{SQHD: c.sqhd(), SQID: c.qid, CID: cmd.sqe.CID}
		trailer = pdu.AppendCapsuleResp(trailer, &cqe, c.dg)
	}
	cmd.send(hdr, data, trailer, release)
	cmd.release()
}

// sendData answers a controller-to-host command with the first len(data)
// bytes; the SGL must be able to take them.
func (cmd *command) sendData(data []byte) {
	if len(data) == 0 {
		cmd.ok(0)
		return
	}
	if int(cmd.sqe.SGL.Length) < len(data) {
		cmd.fail(pdu.SCDataSGLLengthInvalid, true)
		return
	}
	cmd.completeData(data, nil)
}

// dataDir is the data direction of a command (opcode bits 0-1; FCTYPE for
// fabrics commands): 0 none, 1 host to controller, 2 controller to host.
func dataDir(s *pdu.SQE) uint8 {
	op := s.Opcode
	if op == pdu.OpFabrics {
		op = s.FCType()
	}
	return op & 3
}

// checkSGL validates the data pointer against the data received and says
// whether the data must still be fetched with R2Ts.
func (cmd *command) checkSGL() (needR2T bool, st pdu.Status) {
	g := cmd.sqe.SGL
	bad := func(code pdu.StatusCode) (bool, pdu.Status) { return false, pdu.MakeStatus(code, true) }
	switch {
	case cmd.inCapsule:
		if g.ID != pdu.SGLInCapsule {
			return bad(pdu.SCSGLTypeInvalid)
		}
		if dataDir(&cmd.sqe) != 1 {
			return bad(pdu.SCInvalidField)
		}
		if g.Addr > uint64(len(cmd.buf)) || uint64(g.Length) > uint64(len(cmd.buf))-g.Addr {
			return bad(pdu.SCSGLOffsetInvalid)
		}
		cmd.data = cmd.buf[g.Addr : g.Addr+uint64(g.Length)]
		return false, 0
	case g.Length == 0:
		return false, 0
	case g.ID == pdu.SGLInCapsule:
		return bad(pdu.SCDataSGLLengthInvalid)
	case g.ID != pdu.SGLTransport:
		return bad(pdu.SCSGLTypeInvalid)
	case int64(g.Length) > int64(cmd.c.t.cfg.MaxTransferSize):
		return bad(pdu.SCInvalidField)
	}
	return dataDir(&cmd.sqe) == 1, 0
}

func isConnect(s *pdu.SQE) bool {
	return s.Opcode == pdu.OpFabrics && s.FCType() == pdu.FabricsConnect
}

func isAuthOrConnect(s *pdu.SQE) bool {
	fc := s.FCType()
	return s.Opcode == pdu.OpFabrics && (fc == pdu.FabricsConnect || fc == pdu.FabricsAuthSend || fc == pdu.FabricsAuthRecv)
}

// dispatch routes a received command. A connection without a queue (no
// Connect yet) gets Connect only, with at most Connect's 1 KiB of data.
func (c *conn) dispatch(cmd *command) {
	s := &cmd.sqe
	if c.ctrl == nil && !isConnect(s) {
		cmd.fail(pdu.SCCommandSequenceError, true)
		return
	}
	if c.ctrl == nil && s.SGL.Length > pdu.ConnectDataLen {
		// Nothing bigger than Connect's data is buffered for a stranger.
		cmd.fail(pdu.SCDataSGLLengthInvalid, true)
		return
	}
	if c.authx != nil && !c.authed && !isAuthOrConnect(s) {
		cmd.fail(pdu.SCAuthRequired, true)
		return
	}
	needR2T, st := cmd.checkSGL()
	if st != 0 {
		cmd.complete(st, 0, 0)
		return
	}
	if c.qid != 0 && s.Opcode != pdu.OpFabrics {
		if st := cmd.precheckIO(); st != 0 {
			cmd.complete(st, 0, 0)
			return
		}
	}
	if needR2T {
		c.startXfer(cmd)
		return
	}
	c.execute(cmd)
}

// execute runs a command whose data is complete: fabrics and admin
// commands in order on the reader goroutine, I/O commands concurrently.
// Reads, writes and the other commands of one namespace go through its
// scheduler (sched.go); reservation commands and a flush of every
// namespace run at once.
func (c *conn) execute(cmd *command) {
	switch {
	case cmd.sqe.Opcode == pdu.OpFabrics:
		c.fabrics(cmd)
	case c.qid == 0:
		c.admin(cmd)
	default:
		if n := c.ninfl.Add(1); int(n) > c.maxInflight() {
			c.ninfl.Add(-1)
			cmd.fail(pdu.SCTransientTransport, false)
			return
		}
		// The queue is idle: run here and save a goroutine hand-off (QD1
		// latency). A large reply still goes through the writer
		// (ioSched.runOne).
		inline := c.ninfl.Load() == 1 && c.br.Buffered() == 0 && !c.t.cfg.DisableInlineIO
		c.inflight.Add(1)
		cmd.start = time.Now()
		ns := c.namespace(cmd.sqe.NSID)
		if ns == nil || isResvOp(cmd.sqe.Opcode) {
			if inline {
				cmd.runScheduled()
				return
			}
			cmd.direct = true
			go cmd.runScheduled()
			return
		}
		if !ns.sched.admit(cmd) {
			return // started in turn by a goroutine that finishes one
		}
		if inline {
			if next := ns.sched.runOne(cmd, true); next != nil {
				go ns.sched.work(next)
			}
			return
		}
		go ns.sched.work(cmd)
	}
}

// runScheduled runs an I/O command counted in its queue's ninfl and
// inflight.
func (cmd *command) runScheduled() {
	c := cmd.c
	defer c.inflight.Done()
	defer c.ninfl.Add(-1)
	cmd.runIO()
}

// dropQueued ends the I/O commands of c still waiting for their
// namespace's device, without a reply (the connection is closing).
func (c *conn) dropQueued() {
	if c.ctrl == nil || c.ctrl.sub == nil || c.qid == 0 {
		return
	}
	for _, ns := range c.ctrl.sub.ns {
		for _, cmd := range ns.sched.cancel(c) {
			cmd.release()
			c.ninfl.Add(-1)
			c.inflight.Done()
		}
	}
}

// bufPool recycles data buffers in power-of-two size classes from 4 KiB
// to 16 MiB; larger requests are allocated.
type bufPool struct {
	classes [13]sync.Pool
}

func sizeClass(n int) int {
	if n <= 4096 {
		return 0
	}
	return bits.Len(uint(n-1)) - 12
}

func (p *bufPool) get(n int) []byte {
	k := sizeClass(n)
	if k >= len(p.classes) {
		return make([]byte, n)
	}
	if b, ok := p.classes[k].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, 4096<<k)
}

func (p *bufPool) put(b []byte) {
	k := sizeClass(cap(b))
	if k >= len(p.classes) || cap(b) != 4096<<k {
		return
	}
	b = b[:cap(b)]
	p.classes[k].Put(&b)
}
