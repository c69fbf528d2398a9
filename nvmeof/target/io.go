package target

import (
	"context"
	"errors"

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

// runIO executes an I/O command that passed precheckIO.
func (cmd *command) runIO() {
	c, s := cmd.c, &cmd.sqe
	delay, st, failed := c.t.ioFault(s.NSID, faultOp(s.Opcode))
	if err := sleepCtx(c.ctx, delay); err != nil {
		cmd.release()
		return
	}
	if failed {
		cmd.complete(st, 0, 0)
		return
	}
	ns := c.namespace(s.NSID)
	off := int64(s.SLBA()) * int64(bsOf(ns))
	var err error
	switch s.Opcode {
	case pdu.IORead:
		cmd.read(ns, off)
		return
	case pdu.IOWrite:
		if s.CDW12&pdu.RWFUA != 0 {
			err = blockdev.WriteFUA(c.ctx, ns.dev, cmd.data, off)
		} else {
			err = ns.dev.WriteAt(c.ctx, cmd.data, off)
		}
	case pdu.IOFlush:
		err = cmd.flush(ns)
	case pdu.IOWriteZeroes:
		err = cmd.writeZeroes(ns, off)
	case pdu.IODSM:
		if st := cmd.dsm(ns); st != 0 {
			cmd.complete(st, 0, 0)
			return
		}
	}
	cmd.finishErr(err)
}

func bsOf(ns *namespace) int {
	if ns == nil {
		return 0
	}
	return ns.bs
}

func (cmd *command) finishErr(err error) {
	if err != nil {
		cmd.complete(statusFor(err, cmd.sqe.Opcode == pdu.IORead), 0, 0)
		return
	}
	cmd.ok(0)
}

func (cmd *command) read(ns *namespace, off int64) {
	c := cmd.c
	buf := c.t.pool.get(int(cmd.sqe.SGL.Length))
	if err := ns.dev.ReadAt(c.ctx, buf, off); err != nil {
		c.t.pool.put(buf)
		cmd.finishErr(err)
		return
	}
	cmd.completeData(buf, func() { c.t.pool.put(buf) })
}

func (cmd *command) flush(ns *namespace) error {
	if ns != nil {
		return ns.dev.Flush(cmd.c.ctx)
	}
	var errs []error
	for _, n := range cmd.c.ctrl.sub.ns {
		errs = append(errs, n.dev.Flush(cmd.c.ctx))
	}
	return errors.Join(errs...)
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

// statusFor maps a device error to an NVMe status.
func statusFor(err error, read bool) pdu.Status {
	switch {
	case errors.Is(err, context.Canceled):
		return pdu.MakeStatus(pdu.SCAbortSQDeleted, false)
	case errors.Is(err, blockdev.ErrOutOfRange):
		return pdu.MakeStatus(pdu.SCLBAOutOfRange, true)
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
