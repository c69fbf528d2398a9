package target

import (
	"context"
	"errors"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

const nsidBroadcast = 0xFFFFFFFF

func (c *conn) namespace(nsid uint32) *namespace {
	if c.ctrl == nil || c.ctrl.sub == nil {
		return nil
	}
	return c.ctrl.sub.ns[nsid]
}

// precheckIO validates an I/O command before any data moves: controller
// ready, namespace, ANA state, write protection, LBA range and data length.
func (cmd *command) precheckIO() pdu.Status {
	c, s := cmd.c, &cmd.sqe
	if !c.ctrl.ready() {
		return pdu.MakeStatus(pdu.SCCommandSequenceError, true)
	}
	switch s.Opcode {
	case pdu.IORead, pdu.IOWrite, pdu.IOWriteZeroes, pdu.IODSM, pdu.IOFlush:
	case pdu.IOResvRegister, pdu.IOResvReport, pdu.IOResvAcquire, pdu.IOResvRelease:
		if sub := c.ctrl.sub; sub != nil && sub.cfg.NoReservations {
			return pdu.MakeStatus(pdu.SCInvalidOpcode, true)
		}
	default:
		return pdu.MakeStatus(pdu.SCInvalidOpcode, true)
	}
	if s.Opcode == pdu.IOFlush && s.NSID == nsidBroadcast {
		return 0
	}
	ns := c.namespace(s.NSID)
	if ns == nil {
		return pdu.MakeStatus(pdu.SCInvalidNamespace, true)
	}
	if st := c.t.anaState(c.l.idx, ns.cfg.ANAGroup); !st.Usable() {
		return pdu.MakeStatus(st.IOStatus(), false)
	}
	switch s.Opcode {
	case pdu.IORead, pdu.IOWrite:
		if s.Opcode == pdu.IOWrite && ns.cfg.ReadOnly {
			return pdu.MakeStatus(pdu.SCNamespaceWriteProtect, true)
		}
		if !ns.inRange(s.SLBA(), uint64(s.NLB())) {
			return pdu.MakeStatus(pdu.SCLBAOutOfRange, true)
		}
		if uint64(s.SGL.Length) != uint64(s.NLB())*uint64(ns.bs) {
			return pdu.MakeStatus(pdu.SCDataSGLLengthInvalid, true)
		}
	case pdu.IOWriteZeroes, pdu.IODSM:
		if ns.cfg.ReadOnly {
			return pdu.MakeStatus(pdu.SCNamespaceWriteProtect, true)
		}
		if s.Opcode == pdu.IOWriteZeroes && !ns.inRange(s.SLBA(), uint64(s.NLB())) {
			return pdu.MakeStatus(pdu.SCLBAOutOfRange, true)
		}
		if s.Opcode == pdu.IODSM && uint64(s.SGL.Length) < uint64(s.CDW10&0xFF+1)*pdu.DSMRangeLen {
			return pdu.MakeStatus(pdu.SCDataSGLLengthInvalid, true)
		}
	}
	return 0
}

func (ns *namespace) inRange(slba, n uint64) bool {
	return slba < ns.nlb && n <= ns.nlb-slba
}

func faultOp(op uint8) FaultOp {
	switch op {
	case pdu.IORead:
		return FaultRead
	case pdu.IOFlush:
		return FaultFlush
	}
	return FaultWrite
}

// runIO executes an I/O command that passed precheckIO. Reads and writes
// hold the controller's gate for the namespace from the reservation check
// until the device IO is done (not while the reply is sent, which a
// stalled host could block), so that a preempt-and-abort can wait for
// them.
func (cmd *command) runIO() {
	c, s := cmd.c, &cmd.sqe
	ns := c.namespace(s.NSID)
	switch {
	case isResvOp(s.Opcode):
		cmd.reservation(ns)
		return
	case ns == nil: // flush of every namespace
		cmd.complete(cmd.flushAll(), 0, 0)
		return
	}
	cmd.reply(cmd.nsIO(ns))
}

// nsIO runs a read, write or other namespace command on the device under
// its gate and counts it.
func (cmd *command) nsIO(ns *namespace) ioResult {
	g := cmd.ioGate()
	g.RLock()
	r := cmd.guardedIO(ns)
	g.RUnlock()
	if !r.drop {
		s := &cmd.sqe
		d := time.Since(cmd.start)
		ns.counters.count(s.Opcode, uint64(s.SGL.Length), r.st)
		ns.times.observe(s.Opcode, uint64(s.SGL.Length), r.st, d)
		if h := cmd.c.ctrl.hostIO[s.NSID]; h != nil {
			h.observe(s.Opcode, uint64(s.SGL.Length), r.st, d)
		}
	}
	return r
}

// reply answers a command with the outcome of nsIO.
func (cmd *command) reply(r ioResult) {
	switch {
	case r.drop:
		cmd.release()
		if r.release != nil {
			r.release()
		}
	case r.buf != nil && r.release != nil:
		cmd.completeData(r.buf, r.release)
	case r.buf != nil:
		pool := &cmd.c.t.pool
		cmd.completeData(r.buf, func() { pool.put(r.buf) })
	default:
		cmd.complete(r.st, 0, 0)
	}
}

// ioResult is the outcome of a command's device IO.
type ioResult struct {
	st      pdu.Status
	buf     []byte // read data: from the pool, or lent by the device
	release func() // returns lent data (nil: buf is the pool's)
	drop    bool   // the connection is closing: no reply
}

// lend borrows a read's data from a device that keeps it in memory
// (blockdev.Lender): the C2HData is then written to the socket from the
// device's own pages, one copy instead of two. Only for data the sender
// hands to writev as it is (over smallData; no data digest to compute,
// no TLS to encrypt): the kernel's copy then reads the pages, and a page
// trimmed meanwhile fails that write instead of faulting in Go code.
func (cmd *command) lend(ns *namespace, off int64) ([]byte, func(), bool) {
	c, n := cmd.c, int64(cmd.sqe.SGL.Length)
	l, ok := ns.dev.(blockdev.Lender)
	if !ok || n <= smallData || c.dg.Data || c.tls {
		return nil, nil, false
	}
	return l.Lend(off, n)
}

// guardedIO checks the reservation and runs the device IO. REQUIRES: the
// command's gate held in read mode.
func (cmd *command) guardedIO(ns *namespace) ioResult {
	c, s := cmd.c, &cmd.sqe
	if !ns.resv.state.Load().allows(c.ctrl.hostID, s.Opcode) {
		c.t.conflicts.Add(1)
		return ioResult{st: pdu.MakeStatus(pdu.SCReservationConflict, true)}
	}
	delay, st, failed := c.t.ioFault(s.NSID, faultOp(s.Opcode))
	if err := sleepCtx(c.ctx, delay); err != nil {
		return ioResult{drop: true}
	}
	if failed {
		return ioResult{st: st}
	}
	off := int64(s.SLBA()) * int64(ns.bs)
	var err error
	switch s.Opcode {
	case pdu.IORead:
		if b, release, ok := cmd.lend(ns, off); ok {
			return ioResult{buf: b, release: release}
		}
		buf := c.t.pool.get(int(s.SGL.Length))
		if err = ns.dev.ReadAt(c.ctx, buf, off); err == nil {
			return ioResult{buf: buf}
		}
		c.t.pool.put(buf)
	case pdu.IOWrite:
		if s.CDW12&pdu.RWFUA != 0 {
			err = blockdev.WriteFUA(c.ctx, ns.dev, cmd.data, off)
		} else {
			err = ns.dev.WriteAt(c.ctx, cmd.data, off)
		}
	case pdu.IOFlush:
		err = ns.dev.Flush(c.ctx)
	case pdu.IOWriteZeroes:
		err = cmd.writeZeroes(ns, off)
	case pdu.IODSM:
		return ioResult{st: cmd.dsm(ns)}
	}
	return ioResult{st: errStatus(err, s.Opcode == pdu.IORead)}
}

func errStatus(err error, read bool) pdu.Status {
	if err == nil {
		return 0
	}
	return statusFor(err, read)
}

// flushAll flushes every namespace the host may flush, in NSID order,
// each under its gate; the first refusal or error ends it.
func (cmd *command) flushAll() pdu.Status {
	c := cmd.c
	delay, st, failed := c.t.ioFault(cmd.sqe.NSID, FaultFlush)
	if err := sleepCtx(c.ctx, delay); err != nil {
		return pdu.MakeStatus(pdu.SCAbortSQDeleted, false)
	}
	if failed {
		return st
	}
	for _, nsid := range c.ctrl.sub.nsids {
		ns, g := c.ctrl.sub.ns[nsid], c.ctrl.gates[nsid]
		g.RLock()
		st := pdu.MakeStatus(pdu.SCReservationConflict, true)
		if ns.resv.state.Load().allows(c.ctrl.hostID, pdu.IOFlush) {
			st = errStatus(ns.dev.Flush(c.ctx), false)
		} else {
			c.t.conflicts.Add(1)
		}
		g.RUnlock()
		if st != 0 {
			return st
		}
	}
	return 0
}

func (cmd *command) writeZeroes(ns *namespace, off int64) error {
	n := int64(cmd.sqe.NLB()) * int64(ns.bs)
	var err error
	if cmd.sqe.CDW12&pdu.WZDEAC != 0 {
		err = ns.dev.Trim(cmd.c.ctx, off, n)
	} else {
		err = ns.dev.WriteZeroes(cmd.c.ctx, off, n)
	}
	if err == nil && cmd.sqe.CDW12&pdu.RWFUA != 0 {
		err = ns.dev.Flush(cmd.c.ctx)
	}
	return err
}

// dsm runs Dataset Management: with the deallocate attribute each range is
// trimmed; without it the command is a hint and succeeds.
func (cmd *command) dsm(ns *namespace) pdu.Status {
	nr := int(cmd.sqe.CDW10&0xFF) + 1
	rs, err := pdu.ParseDSMRanges(cmd.data, nr)
	if err != nil {
		return pdu.MakeStatus(pdu.SCDataSGLLengthInvalid, true)
	}
	for _, r := range rs {
		if !ns.inRange(r.SLBA, uint64(r.NLB)) {
			return pdu.MakeStatus(pdu.SCLBAOutOfRange, true)
		}
	}
	if cmd.sqe.CDW11&pdu.DSMDeallocate == 0 {
		return 0
	}
	for _, r := range rs {
		if r.NLB == 0 {
			continue
		}
		bs := int64(ns.bs)
		if err := ns.dev.Trim(cmd.c.ctx, int64(r.SLBA)*bs, int64(r.NLB)*bs); err != nil {
			return statusFor(err, false)
		}
	}
	return 0
}

// statusFor maps a device error to an NVMe status. A backing store out of
// space answers Capacity Exceeded with Do Not Retry, as Linux's nvmet does
// for ENOSPC: the namespace is reachable and its data readable, only this
// write did not fit, and sending it again at once would fail again.
func statusFor(err error, read bool) pdu.Status {
	switch {
	case errors.Is(err, context.Canceled):
		return pdu.MakeStatus(pdu.SCAbortSQDeleted, false)
	case errors.Is(err, blockdev.ErrOutOfRange):
		return pdu.MakeStatus(pdu.SCLBAOutOfRange, true)
	case errors.Is(err, blockdev.ErrNoSpace):
		return pdu.MakeStatus(pdu.SCCapacityExceeded, true)
	case errors.Is(err, blockdev.ErrInvalid):
		return pdu.MakeStatus(pdu.SCInvalidField, true)
	case errors.Is(err, blockdev.ErrFenced):
		return pdu.MakeStatus(pdu.SCReservationConflict, true)
	case errors.Is(err, blockdev.ErrCorrupt) && read:
		return pdu.MakeStatus(pdu.SCUnrecoveredReadError, false)
	case errors.Is(err, blockdev.ErrCorrupt):
		return pdu.MakeStatus(pdu.SCWriteFault, false)
	case errors.Is(err, blockdev.ErrUnavailable):
		return pdu.MakeStatus(pdu.SCNamespaceNotReady, false)
	}
	return pdu.MakeStatus(pdu.SCInternalError, false)
}
