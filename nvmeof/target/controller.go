package target

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// aerLimit is the number of outstanding AERs accepted (AERL+1).
const aerLimit = 4

// controller is one association: an admin queue plus its I/O queues, all
// reached through one listener.
//
// Invariants: queues[0] is the admin connection while the controller
// lives; every queue's conn.ctrl is this controller; dead controllers have
// no queues.
type controller struct {
	t       *Target
	id      uint16
	sub     *subsystem // nil for the discovery controller
	disc    bool
	hostNQN string
	hostID  [16]byte
	// gates holds, per namespace, the lock that I/O commands hold in read
	// mode from their reservation check until their device IO is done
	// (see Target.drain). Fixed at Connect.
	gates   map[uint32]*sync.RWMutex
	lst     int
	kato    time.Duration
	traffic atomic.Bool // a command arrived since the keep-alive timer was armed

	// hostIO holds, per namespace, the counters of this controller's host
	// NQN there. Fixed at Connect.
	hostIO map[uint32]*ioTimes

	mu        sync.Mutex
	cc, csts  uint32
	aec       uint32 // asynchronous event configuration
	aers      []uint16
	pending   []pdu.AEREvent
	masked    uint32 // OAES bits of events reported and not yet cleared by a log read
	changedNS []uint32
	nqueues   uint32 // granted I/O queues (Number of Queues)
	queues    map[uint16]*conn
	conns     int // connections attached and not yet finished (outlives queues after destroy)
	timer     *time.Timer
	dead      bool
}

func (ct *controller) oaes() uint32 {
	if ct.disc {
		return 0
	}
	return pdu.OAESNSAttr | pdu.OAESANA
}

func (ct *controller) katoValue() time.Duration {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.kato
}

func (ct *controller) ready() bool {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.csts&pdu.CSTSReady != 0 && ct.csts&pdu.CSTSFatal == 0 && !ct.dead
}

// startKeepAlive arms the keep-alive timer (KATO 0: none).
func (ct *controller) startKeepAlive() {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.kato <= 0 || ct.dead {
		return
	}
	ct.timer = time.AfterFunc(ct.kato, ct.keepAliveExpired)
}

// keepAlive restarts the keep-alive timer.
func (ct *controller) keepAlive() {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.timer != nil && !ct.dead {
		ct.timer.Reset(ct.kato)
	}
}

func (ct *controller) stopTimer() {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.timer != nil {
		ct.timer.Stop()
	}
}

// keepAliveExpired ends the association unless a command arrived on one
// of its queues during the period (traffic-based keep-alive, CTRATT.TBKAS,
// as nvmet does) or its listener is frozen.
func (ct *controller) keepAliveExpired() {
	if ct.traffic.Swap(false) || ct.t.frozen(ct.t.listeners[ct.lst]) {
		ct.keepAlive()
		return
	}
	ct.t.logf("nvmeof/target: controller %d (%s): keep-alive timeout %v expired", ct.id, ct.hostNQN, ct.katoValue())
	ct.destroy()
}

// destroy ends the association: every queue's connection is closed.
func (ct *controller) destroy() {
	ct.mu.Lock()
	if ct.dead {
		ct.mu.Unlock()
		return
	}
	ct.dead = true
	if ct.timer != nil {
		ct.timer.Stop()
	}
	qs := make([]*conn, 0, len(ct.queues))
	for _, q := range ct.queues {
		qs = append(qs, q)
	}
	ct.queues = map[uint16]*conn{}
	ct.mu.Unlock()
	ct.t.removeCtrl(ct)
	for _, q := range qs {
		q.close()
	}
}

// queueGone is called when a queue's connection ends. Losing the admin
// queue ends the association.
func (ct *controller) queueGone(c *conn) {
	ct.mu.Lock()
	if ct.queues[c.qid] == c {
		delete(ct.queues, c.qid)
	}
	ct.conns--
	last := ct.conns == 0
	ct.mu.Unlock()
	if last && ct.sub != nil {
		ct.sub.forget(ct) // its commands have all finished (conn.finish waited)
	}
	if c.qid == 0 {
		ct.destroy()
	}
}

// addQueue attaches an I/O queue; false when qid is taken.
func (ct *controller) addQueue(c *conn, qid uint16) bool {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.dead {
		return false
	}
	if _, taken := ct.queues[qid]; taken {
		return false
	}
	ct.queues[qid] = c
	ct.conns++
	return true
}

// dropIOQueues closes every I/O queue (controller reset).
func (ct *controller) dropIOQueuesLocked() []*conn {
	var qs []*conn
	for qid, q := range ct.queues {
		if qid != 0 {
			qs = append(qs, q)
			delete(ct.queues, qid)
		}
	}
	return qs
}

// raise reports an asynchronous event whose enable bit in the OAES /
// Asynchronous Event Configuration positions is bit. An event type that
// was reported and whose log was not read since stays masked (the host
// will see the latest state when it reads the log).
func (ct *controller) raise(ev pdu.AEREvent, bit uint32) {
	ct.mu.Lock()
	if ct.dead || ct.aec&bit == 0 || ct.masked&bit != 0 {
		ct.mu.Unlock()
		return
	}
	ct.masked |= bit
	ct.pending = append(ct.pending, ev)
	ct.deliverLocked()
}

// deliverLocked completes outstanding AERs with pending events and
// unlocks ct.mu. REQUIRES: ct.mu held; it is released on return.
func (ct *controller) deliverLocked() {
	type done struct {
		cid uint16
		ev  pdu.AEREvent
	}
	var out []done
	for len(ct.aers) > 0 && len(ct.pending) > 0 {
		out = append(out, done{ct.aers[0], ct.pending[0]})
		ct.aers, ct.pending = ct.aers[1:], ct.pending[1:]
	}
	admin := ct.queues[0]
	ct.mu.Unlock()
	if admin == nil {
		return
	}
	for _, d := range out {
		cmd := &command{c: admin, sqe: pdu.SQE{CID: d.cid}}
		cmd.complete(0, d.ev.DW0(), 0)
	}
}

// addAER holds an Asynchronous Event Request.
func (ct *controller) addAER(cmd *command) {
	ct.mu.Lock()
	if len(ct.aers) >= aerLimit {
		ct.mu.Unlock()
		cmd.fail(pdu.SCAERLimitExceeded, true)
		return
	}
	ct.aers = append(ct.aers, cmd.sqe.CID)
	ct.deliverLocked()
}

// clearEvent unmasks an event type after its log page was read.
func (ct *controller) clearEvent(bit uint32) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	ct.masked &^= bit
}

// nsChanged records a changed namespace and raises the event.
func (ct *controller) nsChanged(nsid uint32) {
	ct.mu.Lock()
	if len(ct.changedNS) <= 1024 {
		ct.changedNS = append(ct.changedNS, nsid)
	}
	ct.mu.Unlock()
	ct.raise(pdu.AEREvent{Type: pdu.AETypeNotice, Info: pdu.AENoticeNSChanged, LogPage: pdu.LogChangedNS}, pdu.OAESNSAttr)
}
