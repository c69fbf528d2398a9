package target

import (
	"time"

	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// admin runs an admin command on the reader goroutine.
func (c *conn) admin(cmd *command) {
	ct, s := c.ctrl, &cmd.sqe
	if !ct.ready() {
		cmd.fail(pdu.SCCommandSequenceError, true)
		return
	}
	switch s.Opcode {
	case pdu.AdminIdentify:
		c.identify(cmd)
	case pdu.AdminGetLogPage:
		c.getLogPage(cmd)
	case pdu.AdminSetFeatures:
		ct.setFeatures(cmd)
	case pdu.AdminGetFeatures:
		ct.getFeatures(cmd)
	case pdu.AdminKeepAlive:
		if ct.katoValue() == 0 {
			cmd.fail(pdu.SCKeepAliveInvalid, true)
			return
		}
		ct.keepAlive()
		cmd.ok(0)
	case pdu.AdminAsyncEvent:
		ct.addAER(cmd)
	case pdu.AdminAbort:
		if ct.disc {
			cmd.fail(pdu.SCInvalidOpcode, true)
			return
		}
		cmd.ok(1) // bit 0 set: the command was not aborted
	default:
		cmd.fail(pdu.SCInvalidOpcode, true)
	}
}

func (c *conn) identify(cmd *command) {
	ct, s := c.ctrl, &cmd.sqe
	cns := uint8(s.CDW10)
	if ct.disc && cns != pdu.CNSController {
		cmd.fail(pdu.SCInvalidField, true)
		return
	}
	switch cns {
	case pdu.CNSController:
		cmd.sendData(c.identifyController())
	case pdu.CNSNamespace, pdu.CNSIndependentNS, pdu.CNSNSDescList:
		c.identifyNamespace(cmd, cns)
	case pdu.CNSActiveNSList:
		if s.NSID >= 0xFFFFFFFE {
			cmd.fail(pdu.SCInvalidNamespace, true)
			return
		}
		var ids []uint32
		for _, id := range ct.sub.nsids {
			if id > s.NSID {
				ids = append(ids, id)
			}
		}
		cmd.sendData(pdu.MarshalNSList(ids))
	case pdu.CNSCSNamespace, pdu.CNSCSController:
		if uint8(s.CDW11>>24) != 0 {
			cmd.fail(pdu.SCInvalidField, true)
			return
		}
		cmd.sendData(make([]byte, pdu.IdentifyDataLen))
	default:
		cmd.fail(pdu.SCInvalidField, true)
	}
}

// identifyController builds Identify Controller data with the fields the
// Linux host checks (see the package documentation).
func (c *conn) identifyController() []byte {
	t, ct := c.t, c.ctrl
	id := pdu.IdentifyController{
		FR: "1.0", RAB: 6, MDTS: uint8(mdts(t.cfg.MaxTransferSize)), CNTLID: ct.id,
		VER: nvmeVersion(), OAES: ct.oaes(), CTRATT: pdu.CTRATTHostID128 | pdu.CTRATTTBKAS,
		ACL: 3, AERL: aerLimit - 1, LPA: 0x04, KAS: 1,
		SQES: 0x66, CQES: 0x44, MAXCMD: uint16(t.cfg.QueueSize),
		SGLS: pdu.SGLSSupported | pdu.SGLSOffsetData, MSDBD: 1, IORCSZ: 1,
		IOCCSZ: uint32(pdu.SQELen+t.cfg.InCapsuleDataSize) / 16,
	}
	if ct.disc {
		id.SN, id.MN, id.SubNQN = "discovery", "nvstripe", pdu.DiscoveryNQN
		id.CNTRLTYPE = pdu.CtrlTypeDisc
		return id.Marshal()
	}
	sub := ct.sub.cfg
	id.SN, id.MN, id.SubNQN = sub.Serial, sub.Model, sub.NQN
	id.CNTRLTYPE = pdu.CtrlTypeIO
	id.CMIC = pdu.CMICMultiPort | pdu.CMICMultiCtrl | pdu.CMICANA
	id.ANATT = uint8(min(255, max(1, t.cfg.ANATT/time.Second)))
	id.ANACAP = 0x1F
	id.ANAGRPMAX, id.NANAGRPID = MaxANAGroups, MaxANAGroups
	id.NN, id.MNAN = MaxNamespaces, MaxNamespaces
	id.ONCS = pdu.ONCSDSM | pdu.ONCSWriteZeroes | pdu.ONCSReservations
	if sub.NoReservations {
		id.ONCS &^= pdu.ONCSReservations
	}
	id.VWC = 1
	return id.Marshal()
}

func (c *conn) identifyNamespace(cmd *command, cns uint8) {
	s := &cmd.sqe
	if s.NSID == 0 || s.NSID > MaxNamespaces {
		cmd.fail(pdu.SCInvalidNamespace, true)
		return
	}
	ns := c.namespace(s.NSID)
	if ns == nil {
		if cns == pdu.CNSNSDescList {
			cmd.fail(pdu.SCInvalidNamespace, true)
			return
		}
		cmd.sendData(make([]byte, pdu.IdentifyDataLen)) // inactive namespace: zeros
		return
	}
	switch cns {
	case pdu.CNSNamespace:
		cmd.sendData(c.nsData(ns))
	case pdu.CNSIndependentNS:
		ind := pdu.IndependentNamespace{NMIC: pdu.NMICShared, ANAGRPID: ns.cfg.ANAGroup, NSTAT: 1}
		if ns.cfg.ReadOnly {
			ind.NSATTR = 1
		}
		cmd.sendData(ind.Marshal())
	case pdu.CNSNSDescList:
		cmd.sendData(pdu.MarshalNSDescList([]pdu.NSDescriptor{
			{Type: pdu.NIDTUUID, ID: ns.cfg.UUID[:]},
			{Type: pdu.NIDTNGUID, ID: ns.cfg.NGUID[:]},
			{Type: pdu.NIDTCSI, ID: []byte{0}},
		}))
	}
}

func (c *conn) nsData(ns *namespace) []byte {
	d := pdu.IdentifyNamespace{
		NSZE: ns.nlb, NCAP: ns.nlb, NUSE: ns.nlb, NMIC: pdu.NMICShared,
		DLFEAT: pdu.DLFEATReadZeroes | pdu.DLFEATWZDeac, ANAGRPID: ns.cfg.ANAGroup,
		NGUID: ns.cfg.NGUID, LBAF: []pdu.LBAFormat{{LBADS: uint8(log2(ns.bs))}},
		RESCAP: pdu.RESCAPTypes | pdu.RESCAPIEKey13,
	}
	if ns.resv.store != nil {
		d.RESCAP |= pdu.RESCAPPTPL
	}
	if sub := c.ctrl.sub; sub != nil && sub.cfg.NoReservations {
		d.RESCAP = 0
	}
	if st := c.t.anaState(c.l.idx, ns.cfg.ANAGroup); st == pdu.ANAInaccessible || st == pdu.ANAPersistentLoss {
		d.NUSE = 0
	}
	if ns.cfg.ReadOnly {
		d.NSATTR = 1
	}
	return d.Marshal()
}

func log2(n int) int {
	k := 0
	for n > 1 {
		n >>= 1
		k++
	}
	return k
}

func (c *conn) getLogPage(cmd *command) {
	ct := c.ctrl
	g := pdu.ParseGetLogPageCmd(&cmd.sqe)
	if g.Offset%4 != 0 || g.Len() > c.t.cfg.MaxTransferSize {
		cmd.fail(pdu.SCInvalidField, true)
		return
	}
	var log []byte
	switch {
	case ct.disc && g.LID == pdu.LogDiscovery:
		log = c.t.discoveryLog(ct.hostNQN, c.nc.LocalAddr())
	case ct.disc:
		cmd.fail(pdu.SCInvalidField, true)
		return
	case g.LID == pdu.LogANA:
		log = c.t.anaLog(ct.sub, ct.lst).Append(nil, g.LSP&pdu.ANALSPRGO != 0)
		if !g.RAE {
			ct.clearEvent(pdu.OAESANA)
		}
	case g.LID == pdu.LogChangedNS:
		log = ct.takeChangedNS(g.RAE)
	case g.LID == pdu.LogError, g.LID == pdu.LogSMART, g.LID == pdu.LogFirmware:
		log = nil // all zeros
	default:
		cmd.fail(pdu.SCInvalidField, true)
		return
	}
	if g.Offset > uint64(len(log)) && len(log) > 0 {
		cmd.fail(pdu.SCInvalidField, true)
		return
	}
	out := make([]byte, g.Len())
	if g.Offset < uint64(len(log)) {
		copy(out, log[g.Offset:])
	}
	cmd.sendData(out)
}

// takeChangedNS returns the Changed Namespace List log and, unless rae,
// clears it and re-enables the event.
func (ct *controller) takeChangedNS(rae bool) []byte {
	ct.mu.Lock()
	ids := ct.changedNS
	if len(ids) > 1024 {
		ids = []uint32{0xFFFFFFFF}
	}
	b := pdu.MarshalNSList(ids)
	if !rae {
		ct.changedNS = nil
		ct.masked &^= pdu.OAESNSAttr
	}
	ct.mu.Unlock()
	return b
}

func (ct *controller) setFeatures(cmd *command) {
	s := &cmd.sqe
	fid, v := uint8(s.CDW10), s.CDW11
	switch {
	case fid == pdu.FeatKeepAlive:
		ct.setKATO(time.Duration(v) * time.Millisecond)
		cmd.ok(0)
	case fid == pdu.FeatAsyncEvent:
		ct.mu.Lock()
		ct.aec = v & ct.oaes()
		ct.mu.Unlock()
		cmd.ok(0)
	case ct.disc:
		cmd.fail(pdu.SCInvalidField, true)
	case fid == pdu.FeatNumQueues:
		if uint16(v) == 0xFFFF || uint16(v>>16) == 0xFFFF {
			cmd.fail(pdu.SCInvalidField, true)
			return
		}
		n := uint32(ct.t.cfg.MaxIOQueues)
		ct.mu.Lock()
		ct.nqueues = n
		ct.mu.Unlock()
		cmd.ok((n - 1) | (n-1)<<16)
	case fid == pdu.FeatVWC:
		cmd.ok(0)
	default:
		cmd.fail(pdu.SCInvalidField, true)
	}
}

func (ct *controller) getFeatures(cmd *command) {
	fid := uint8(cmd.sqe.CDW10)
	ct.mu.Lock()
	kato, aec, nq := ct.kato, ct.aec, ct.nqueues
	ct.mu.Unlock()
	switch {
	case fid == pdu.FeatKeepAlive:
		cmd.ok(uint32(kato / time.Millisecond))
	case fid == pdu.FeatAsyncEvent:
		cmd.ok(aec)
	case ct.disc:
		cmd.fail(pdu.SCInvalidField, true)
	case fid == pdu.FeatNumQueues:
		cmd.ok((nq - 1) | (nq-1)<<16)
	case fid == pdu.FeatVWC:
		cmd.ok(1)
	case fid == pdu.FeatArbitration, fid == pdu.FeatPowerMgmt:
		cmd.ok(0)
	default:
		cmd.fail(pdu.SCInvalidField, true)
	}
}

// setKATO changes the keep-alive timeout (Set Features 0x0F).
func (ct *controller) setKATO(d time.Duration) {
	ct.mu.Lock()
	ct.kato = d
	if ct.timer != nil {
		ct.timer.Stop()
		ct.timer = nil
	}
	ct.mu.Unlock()
	ct.startKeepAlive()
}
