package target

import (
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// Connect SQE field offsets, for Invalid Parameter IPO values.
const (
	sqeOffQID    = 42
	sqeOffSQSize = 44
)

func (c *conn) fabrics(cmd *command) {
	s := &cmd.sqe
	switch s.FCType() {
	case pdu.FabricsConnect:
		c.connect(cmd)
	case pdu.FabricsAuthSend, pdu.FabricsAuthRecv:
		c.authCmd(cmd)
	case pdu.FabricsPropertyGet, pdu.FabricsPropertySet:
		if c.qid != 0 {
			cmd.fail(pdu.SCInvalidField, true)
			return
		}
		if s.FCType() == pdu.FabricsPropertyGet {
			c.ctrl.propertyGet(cmd)
		} else {
			c.ctrl.propertySet(cmd)
		}
	default:
		cmd.fail(pdu.SCInvalidOpcode, true)
	}
}

// invalidParam fails a Connect with Invalid Parameters naming the bad
// field: off is a byte offset into the SQE (inData false) or the Connect
// data (inData true).
func invalidParam(cmd *command, off uint16, inData bool) {
	dw0 := uint32(off)
	if inData {
		dw0 |= 1 << 16
	}
	cmd.complete(pdu.MakeStatus(pdu.SCConnectInvalidParam, true), dw0, 0)
}

func (c *conn) connect(cmd *command) {
	if c.ctrl != nil {
		cmd.fail(pdu.SCCommandSequenceError, true)
		return
	}
	cc := pdu.ParseConnectCmd(&cmd.sqe)
	if cc.RecFmt != 0 {
		cmd.fail(pdu.SCConnectIncompatFormat, true)
		return
	}
	if len(cmd.data) < pdu.ConnectDataLen {
		cmd.fail(pdu.SCDataSGLLengthInvalid, true)
		return
	}
	d, err := pdu.ParseConnectData(cmd.data)
	if err != nil {
		invalidParam(cmd, pdu.ConnectOffSubNQN, true)
		return
	}
	if !c.tlsAllows(cmd, d) {
		return
	}
	limit := c.t.cfg.QueueSize
	if cc.QID == 0 {
		limit = max(limit, adminQueueSize) // Linux always asks for 32 admin entries
	}
	if cc.SQSize == 0 || int(cc.SQSize) >= limit {
		invalidParam(cmd, sqeOffSQSize, false)
		return
	}
	// A host that must authenticate is counted once it has (authCmd):
	// a stranger claiming its NQN must not use up its queues.
	if !c.t.keyed(d.SubNQN, d.HostNQN) && !c.takeHostSlot(d.HostNQN) {
		cmd.fail(pdu.SCConnectControllerBusy, false)
		return
	}
	if cc.QID == 0 {
		c.connectAdmin(cmd, cc, d)
	} else {
		c.connectIO(cmd, cc, d)
	}
	if c.ctrl == nil {
		c.releaseHostSlot()
		return
	}
	c.queued = true
	c.t.queues.Add(1)
	c.admitted()
	if c.authx == nil {
		c.handshakeDone()
	}
}

func (c *conn) setQueue(cc pdu.ConnectCmd) {
	c.sqsize = uint32(cc.SQSize) + 1
	c.noSQFlow = cc.CAttr&pdu.CAttrDisableSQFlow != 0
	c.qid = cc.QID
}

func (c *conn) connectAdmin(cmd *command, cc pdu.ConnectCmd, d pdu.ConnectData) {
	t := c.t
	ct := &controller{t: t, hostNQN: d.HostNQN, hostID: d.HostID, lst: c.l.idx, queues: map[uint16]*conn{}}
	if d.SubNQN == pdu.DiscoveryNQN {
		ct.disc = true
		ct.kato = time.Duration(cc.KATO) * time.Millisecond
		if ct.kato == 0 {
			ct.kato = t.cfg.DiscoveryKATO
		}
	} else {
		ct.sub = t.subs[d.SubNQN]
		if ct.sub == nil {
			t.refuse(RefusedNoSubsystem)
			invalidParam(cmd, pdu.ConnectOffSubNQN, true)
			return
		}
		if !ct.sub.hostAllowed(d.HostNQN) {
			t.refuse(RefusedHostNotAllowed)
			c.logRefusedHost(d.SubNQN, d.HostNQN)
			cmd.complete(pdu.MakeStatus(pdu.SCConnectInvalidHost, true), pdu.ConnectOffHostNQN|1<<16, 0)
			return
		}
		ct.kato = time.Duration(cc.KATO) * time.Millisecond
		ct.gates = make(map[uint32]*sync.RWMutex, len(ct.sub.ns))
		ct.hostIO = make(map[uint32]*ioTimes, len(ct.sub.ns))
		for nsid, ns := range ct.sub.ns {
			ct.gates[nsid] = new(sync.RWMutex)
			ct.hostIO[nsid] = ns.hosts.of(d.HostNQN)
		}
	}
	if d.CNTLID != pdu.CNTLIDDynamic {
		invalidParam(cmd, pdu.ConnectOffCNTLID, true)
		return
	}
	ct.aec = ct.oaes()
	ct.nqueues = uint32(t.cfg.MaxIOQueues)
	ct.queues[0] = c
	ct.conns = 1
	t.mu.Lock()
	ok := !t.closed && t.allocCtrlLocked(ct)
	t.mu.Unlock()
	if !ok {
		cmd.fail(pdu.SCConnectControllerBusy, false)
		return
	}
	c.setQueue(cc)
	c.ctrl = ct
	if ct.sub != nil {
		ct.sub.track(ct)
	}
	ct.startKeepAlive()
	t.logf("nvmeof/target: %s: controller %d for %s (%s), kato %v", c.nc.RemoteAddr(), ct.id, d.SubNQN, d.HostNQN, ct.kato)
	cmd.ok(uint32(ct.id) | c.requireAuth(ct))
}

func (c *conn) connectIO(cmd *command, cc pdu.ConnectCmd, d pdu.ConnectData) {
	ct := c.t.ctrl(d.CNTLID)
	if ct == nil || ct.disc || ct.sub.cfg.NQN != d.SubNQN || ct.hostNQN != d.HostNQN || ct.hostID != d.HostID {
		invalidParam(cmd, pdu.ConnectOffCNTLID, true)
		return
	}
	if ct.lst != c.l.idx {
		invalidParam(cmd, pdu.ConnectOffCNTLID, true)
		return
	}
	if uint32(cc.QID) > ct.grantedQueues() {
		cmd.fail(pdu.SCInvalidQueueID, true)
		return
	}
	if !ct.ready() {
		cmd.fail(pdu.SCCommandSequenceError, true)
		return
	}
	if !ct.addQueue(c, cc.QID) {
		cmd.fail(pdu.SCCommandSequenceError, true)
		return
	}
	c.setQueue(cc)
	c.ctrl = ct
	cmd.ok(uint32(ct.id) | c.requireAuth(ct))
}

func (ct *controller) grantedQueues() uint32 {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.nqueues
}

// capValue is the CAP property: MQES, TO 15 (7.5 s), the NVM command set.
func (ct *controller) capValue() uint64 {
	return pdu.MakeCAP(uint16(ct.t.cfg.QueueSize-1), 15, pdu.CAPCSSNVM)
}

// version reported in VS and Identify VER: 1.4 (CNS 03h descriptors, no
// CNS 08h requirement; ANA is gated on CMIC, not on the version).

func nvmeVersion() uint32 { return pdu.MakeVersion(1, 4, 0) }

func (ct *controller) propertyGet(cmd *command) {
	p := pdu.ParsePropertyCmd(&cmd.sqe)
	capv := ct.capValue()
	ct.mu.Lock()
	cc, csts := ct.cc, ct.csts
	ct.mu.Unlock()
	switch {
	case p.Offset == pdu.PropCAP && p.Size8:
		cmd.complete(0, uint32(capv), uint32(capv>>32))
	case p.Offset == pdu.PropCAP:
		cmd.ok(uint32(capv))
	case p.Offset == pdu.PropCAP+4 && !p.Size8:
		cmd.ok(uint32(capv >> 32))
	case p.Size8:
		cmd.fail(pdu.SCInvalidField, true)
	case p.Offset == pdu.PropVS:
		cmd.ok(nvmeVersion())
	case p.Offset == pdu.PropCC:
		cmd.ok(cc)
	case p.Offset == pdu.PropCSTS:
		cmd.ok(csts)
	default:
		cmd.fail(pdu.SCInvalidField, true)
	}
}

func (ct *controller) propertySet(cmd *command) {
	p := pdu.ParsePropertyCmd(&cmd.sqe)
	if p.Offset != pdu.PropCC || p.Size8 {
		cmd.fail(pdu.SCInvalidField, true)
		return
	}
	drop := ct.setCC(uint32(p.Value))
	for _, q := range drop {
		q.close()
	}
	cmd.ok(0)
}

// setCC applies a CC write: the enable and shutdown sequences. It returns
// I/O queues to close (controller reset).
func (ct *controller) setCC(cc uint32) []*conn {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	old := ct.cc
	ct.cc = cc
	var drop []*conn
	switch {
	case cc&pdu.CCEnable != 0 && old&pdu.CCEnable == 0:
		if ct.ccValid(cc) {
			ct.csts |= pdu.CSTSReady
		} else {
			ct.csts |= pdu.CSTSFatal
		}
	case cc&pdu.CCEnable == 0 && old&pdu.CCEnable != 0:
		ct.csts &^= pdu.CSTSReady | pdu.CSTSFatal
		drop = ct.dropIOQueuesLocked()
	}
	if cc&pdu.CCShnMask != 0 && old&pdu.CCShnMask == 0 {
		ct.csts = ct.csts&^pdu.CSTSShstMask | pdu.CSTSShstComplete
		drop = append(drop, ct.dropIOQueuesLocked()...)
	}
	if cc&pdu.CCShnMask == 0 && old&pdu.CCShnMask != 0 {
		ct.csts &^= pdu.CSTSShstMask
	}
	return drop
}

// ccValid checks CC at enable time as nvmet does: MPS 0 (4 KiB), AMS 0,
// CSS 0 (NVM) or 6, and on I/O controllers IOSQES 6 / IOCQES 4.
func (ct *controller) ccValid(cc uint32) bool {
	if pdu.CCMPS(cc) != 0 || pdu.CCAMS(cc) != 0 {
		return false
	}
	if css := pdu.CCCSS(cc); css != 0 && css != 6 {
		return false
	}
	if ct.disc {
		return true
	}
	return pdu.CCIOSQES(cc) == 6 && pdu.CCIOCQES(cc) == 4
}
