package target

import (
	"errors"
	"sync"
	"syscall"

	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// isResvOp reports whether op is one of the reservation commands.
func isResvOp(op uint8) bool {
	switch op {
	case pdu.IOResvRegister, pdu.IOResvReport, pdu.IOResvAcquire, pdu.IOResvRelease:
		return true
	}
	return false
}

// reservation runs a reservation command on ns.
func (cmd *command) reservation(ns *namespace) {
	s := &cmd.sqe
	if s.Opcode == pdu.IOResvReport {
		cmd.resvReport(ns)
		return
	}
	c := pdu.ParseResvCmd(s.CDW10)
	need := pdu.ResvKeysLen
	if s.Opcode == pdu.IOResvRelease {
		need = pdu.ResvKeyLen
	}
	if len(cmd.data) < need {
		cmd.fail(pdu.SCDataSGLLengthInvalid, true)
		return
	}
	k1, k2, _ := pdu.ParseResvKeys(cmd.data)
	h := cmd.c.ctrl.hostID
	r := &ns.resv
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.load()
	var res resvResult
	switch s.Opcode {
	case pdu.IOResvRegister:
		res = st.register(h, c, k1, k2)
	case pdu.IOResvAcquire:
		res = st.acquire(h, c, k1, k2)
	default:
		res = st.release(h, c, k1)
	}
	if res.st == 0 && res.next != nil {
		res.st = cmd.publish(ns, res.next)
	}
	if res.st == 0 && c.Action == pdu.ResvAcquireActionPreemptAbrt && s.Opcode == pdu.IOResvAcquire {
		drain(cmd.c.ctrl.sub, s.NSID, res.preempted)
	}
	cmd.complete(res.st, 0, 0)
}

// publish stores next (when the namespace persists reservations) and makes
// it the state I/O commands see. REQUIRES: ns.resv.mu.
func (cmd *command) publish(ns *namespace, next *resvState) pdu.Status {
	if s := ns.resv.store; s != nil {
		if err := s.save(next); err != nil {
			cmd.c.t.logf("nvmeof/target: nsid %d: %v", cmd.sqe.NSID, err)
			if errors.Is(err, syscall.ENOSPC) {
				return pdu.MakeStatus(pdu.SCCapacityExceeded, true)
			}
			return pdu.MakeStatus(pdu.SCInternalError, false)
		}
	}
	ns.resv.state.Store(next.seal())
	return 0
}

// drain waits until every I/O command of the given hosts on nsid that
// passed the reservation check before the new state was published has
// finished: each such command holds its controller's gate for the
// namespace in read mode until its device IO is done. Taking the gate in
// write mode therefore waits for them; commands arriving meanwhile wait
// too, then see the new state and fail with a reservation conflict.
func drain(sub *subsystem, nsid uint32, hosts []hostID) {
	if len(hosts) == 0 {
		return
	}
	var gates []*sync.RWMutex
	sub.mu.Lock()
	for ct := range sub.live {
		for _, h := range hosts {
			if ct.hostID == h && ct.gates[nsid] != nil {
				gates = append(gates, ct.gates[nsid])
			}
		}
	}
	sub.mu.Unlock()
	for _, g := range gates {
		g.Lock()
		g.Unlock() // an empty critical section: the wait is the point
	}
}

// resvReport answers Reservation Report. As in nvmet, only the extended
// data structure (128-bit host IDs) is offered: EDS 0 gets Host
// Identifier Inconsistent Format, which makes the Linux host retry with it.
func (cmd *command) resvReport(ns *namespace) {
	s := &cmd.sqe
	if s.CDW11&pdu.ResvReportEDS == 0 {
		cmd.fail(pdu.SCHostIDInconsistent, true)
		return
	}
	n := 4 * (uint64(s.CDW10) + 1)
	if n < pdu.ResvReportHeaderLen || n > uint64(s.SGL.Length) {
		cmd.fail(pdu.SCInvalidField, true)
		return
	}
	rep := ns.resv.load().report(ns.resv.store != nil)
	cmd.sendData(rep.MarshalExt(int(n)))
}

// ReservationConflicts returns the number of I/O commands the target has
// refused because of a reservation (status 0x83) since it was created.
func (t *Target) ReservationConflicts() uint64 { return t.conflicts.Load() }

// ioGate returns the gate of the command's controller for its namespace.
func (cmd *command) ioGate() *sync.RWMutex { return cmd.c.ctrl.gates[cmd.sqe.NSID] }
