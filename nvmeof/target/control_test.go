package target

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// TestANAChangeEvent: an AER is held until SetANAState (A.4.6, A.5.3);
// the event is masked until the host reads the ANA log; I/O in an
// inaccessible group fails with 0x302 without DNR (A.5.1).
func TestANAChangeEvent(t *testing.T) {
	f := newFixture(t, 2, nil)
	a := dial(t, f.t.Addr(0), pdu.Digests{Header: true})
	cntlid := a.adminUp(0)
	mustOK(t, "set aec", a.do(pdu.FeaturesSQE(0, true, pdu.FeatAsyncEvent, pdu.OAESANA), nil, nil))
	io := ioUp(t, f.t.Addr(0), pdu.Digests{Header: true}, 1, cntlid, 0)
	aer := pdu.SQE{Opcode: pdu.AdminAsyncEvent, CID: 31, Flags: pdu.PSDTSGL}
	a.submit(&aer, nil)
	// A change on the other listener does not concern this controller.
	if err := f.t.SetANAState(1, 1, pdu.ANAInaccessible); err != nil {
		t.Fatal(err)
	}
	mustOK(t, "keep working", a.do(pdu.FeaturesSQE(0, false, pdu.FeatAsyncEvent, 0), nil, nil))
	if err := f.t.SetANAState(0, 1, pdu.ANAInaccessible); err != nil {
		t.Fatal(err)
	}
	c := pdu.ParseCapsuleResp(a.read().Hdr)
	ev := pdu.ParseAEREvent(c.DW0)
	if c.CID != 31 || !c.Status.Success() || ev != (pdu.AEREvent{Type: pdu.AETypeNotice, Info: pdu.AENoticeANAChange, LogPage: pdu.LogANA}) {
		t.Fatalf("aer completion %+v event %+v", c, ev)
	}
	expectStatus(t, "io while inaccessible", io.do(rwSQE(pdu.IORead, 1, 0, 1, false), nil, make([]byte, nsBS)), pdu.SCANAInaccessible, false)
	mustOK(t, "other group still fine", io.do(rwSQE(pdu.IORead, 2, 0, 1, false), nil, make([]byte, nsBS)))
	b, _ := a.identify(pdu.CNSNamespace, 1)
	if ns, _ := pdu.ParseIdentifyNamespace(b); ns.NUSE != 0 || ns.NCAP == 0 {
		t.Fatalf("inaccessible ns: nuse %d ncap %d", ns.NUSE, ns.NCAP)
	}
	// Masked until the log is read: a second change sends nothing yet.
	aer.CID = 30
	a.submit(&aer, nil)
	f.t.SetANAState(0, 1, pdu.ANAChange)
	checkANALog(t, a, pdu.ANAChange) // clears the mask (RAE 0)
	f.t.SetANAState(0, 1, pdu.ANAOptimized)
	c = pdu.ParseCapsuleResp(a.read().Hdr)
	if c.CID != 30 || pdu.ParseAEREvent(c.DW0).Info != pdu.AENoticeANAChange {
		t.Fatalf("second aer %+v", c)
	}
	checkANALog(t, a, pdu.ANAOptimized)
	mustOK(t, "io optimized again", io.do(rwSQE(pdu.IORead, 1, 0, 1, false), nil, make([]byte, nsBS)))
	if st, _ := f.t.ANAState(1, 1); st != pdu.ANAInaccessible {
		t.Fatalf("listener 1 state %v", st)
	}
	if err := f.t.SetANAState(0, 99, pdu.ANAOptimized); err == nil {
		t.Fatal("unknown group accepted")
	}
	expectStatus(t, "aer limit", func() pdu.CQE {
		for i := 0; i < aerLimit; i++ {
			s := pdu.SQE{Opcode: pdu.AdminAsyncEvent, CID: uint16(40 + i), Flags: pdu.PSDTSGL}
			a.submit(&s, nil)
		}
		return a.do(pdu.SQE{Opcode: pdu.AdminAsyncEvent}, nil, nil)
	}(), pdu.SCAERLimitExceeded, true)
}

// TestDiscovery: the discovery controller (A.6) lists allowed subsystems
// on every listener.
func TestDiscovery(t *testing.T) {
	f := newFixture(t, 2, nil)
	d := dial(t, f.t.Addr(1), pdu.Digests{})
	c := d.connect(0, 31, pdu.CNTLIDDynamic, pdu.DiscoveryNQN, testHost, 0, 0)
	mustOK(t, "discovery connect", c)
	d.enable(false)
	b, c := d.identify(pdu.CNSController, 0)
	mustOK(t, "identify", c)
	id, _ := pdu.ParseIdentifyController(b)
	if id.CNTRLTYPE != pdu.CtrlTypeDisc || id.SubNQN != pdu.DiscoveryNQN || id.CMIC != 0 {
		t.Fatalf("discovery identify %+v", id)
	}
	_, c = d.identify(pdu.CNSNamespace, 1)
	expectStatus(t, "cns 0 on discovery", c, pdu.SCInvalidField, true)
	hdr, c := d.getLog(pdu.LogDiscovery, 0, 1024, 0)
	mustOK(t, "log header", c)
	n := pdu.DiscoveryNumRec(hdr)
	if n != 2 {
		t.Fatalf("numrec %d, want 2 (1 allowed subsystem x 2 listeners)", n)
	}
	full, c := d.getLog(pdu.LogDiscovery, 0, 1024*(1+int(n)), 0)
	mustOK(t, "full log", c)
	l, err := pdu.ParseDiscoveryLog(full)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range l.Entries {
		host, port, _ := net.SplitHostPort(f.t.Addr(i))
		if e.SubNQN != testNQN || e.TrType != pdu.TrTypeTCP || e.AdrFam != pdu.AdrFamIPv4 || e.SubType != pdu.SubTypeNVMe ||
			e.TrAddr != host || e.TrSvcID != port || e.PortID != uint16(i+1) || e.CNTLID != 0xFFFF {
			t.Fatalf("entry %d %+v", i, e)
		}
	}
	part, c := d.getLog(pdu.LogDiscovery, 0, 1024, 2048)
	if mustOK(t, "windowed read", c); string(part) != string(full[2048:]) {
		t.Fatal("windowed discovery read differs")
	}
	_, c = d.getLog(pdu.LogANA, 0, 4096, 0)
	expectStatus(t, "ana log on discovery", c, pdu.SCInvalidField, true)
	mustOK(t, "keep alive", d.do(pdu.SQE{Opcode: pdu.AdminKeepAlive}, nil, nil))
	// An I/O queue for a discovery controller is refused.
	q := dial(t, f.t.Addr(1), pdu.Digests{})
	cd := pdu.ConnectData{CNTLID: uint16(c.DW0), SubNQN: pdu.DiscoveryNQN, HostNQN: testHost}
	if c := q.do(pdu.ConnectCmd{QID: 1, SQSize: 31}.SQE(0), cd.Marshal(), nil); c.Status.Success() {
		t.Fatal("io queue on a discovery controller accepted")
	}
}

// TestConnectErrors checks the Connect rules of A.3.2.
func TestConnectErrors(t *testing.T) {
	f := newFixture(t, 1, nil)
	addr := f.t.Addr(0)
	h := dial(t, addr, pdu.Digests{})
	expectStatus(t, "command before connect", h.do(pdu.SQE{Opcode: pdu.AdminKeepAlive}, nil, nil), pdu.SCCommandSequenceError, true)
	expectStatus(t, "property before connect", h.propGet(pdu.PropCAP, true), pdu.SCCommandSequenceError, true)
	c := h.connect(0, 31, pdu.CNTLIDDynamic, "nqn.nope", testHost, 0, 0)
	if expectStatus(t, "unknown subsystem", c, pdu.SCConnectInvalidParam, true); c.DW0 != 256|1<<16 {
		t.Fatalf("ipo/iattr %#x", c.DW0)
	}
	expectStatus(t, "host not allowed", h.connect(0, 31, pdu.CNTLIDDynamic, testNQN+"-other", testHost, 0, 0), pdu.SCConnectInvalidHost, true)
	c = h.connect(0, 0, pdu.CNTLIDDynamic, testNQN, testHost, 0, 0)
	if expectStatus(t, "sqsize 0", c, pdu.SCConnectInvalidParam, true); c.DW0 != 44 {
		t.Fatalf("sqsize ipo %#x", c.DW0)
	}
	expectStatus(t, "static cntlid", h.connect(0, 31, 5, testNQN, testHost, 0, 0), pdu.SCConnectInvalidParam, true)
	rec := pdu.ConnectCmd{RecFmt: 1, SQSize: 31}.SQE(0)
	cd := pdu.ConnectData{CNTLID: 0xFFFF, SubNQN: testNQN, HostNQN: testHost}
	cd.HostID[0] = 1
	expectStatus(t, "recfmt", h.do(rec, cd.Marshal(), nil), pdu.SCConnectIncompatFormat, true)
	// Connect data through R2T (older hosts, A.2.4) works too.
	viaR2T := pdu.ConnectCmd{SQSize: 31}.SQE(0)
	viaR2T.SGL.ID = pdu.SGLTransport
	c = h.do(viaR2T, cd.Marshal(), nil)
	mustOK(t, "connect via r2t", c)
	cntlid := uint16(c.DW0)
	expectStatus(t, "second connect", h.connect(0, 31, pdu.CNTLIDDynamic, testNQN, testHost, 0, 0), pdu.SCCommandSequenceError, true)
	expectStatus(t, "identify before enable", func() pdu.CQE { _, c := h.identify(1, 0); return c }(), pdu.SCCommandSequenceError, true)
	q := dial(t, addr, pdu.Digests{})
	expectStatus(t, "io connect before enable", q.connect(1, 31, cntlid, testNQN, testHost, 0, 0), pdu.SCCommandSequenceError, true)
	h.enable(true)
	expectStatus(t, "io connect wrong cntlid", q.connect(1, 31, cntlid+100, testNQN, testHost, 0, 0), pdu.SCConnectInvalidParam, true)
	expectStatus(t, "io connect other host", q.connect(1, 31, cntlid, testNQN, "nqn.x", 0, 0), pdu.SCConnectInvalidParam, true)
	expectStatus(t, "io queue id too big", q.connect(999, 31, cntlid, testNQN, testHost, 0, 0), pdu.SCInvalidQueueID, true)
	mustOK(t, "io connect", q.connect(1, 31, cntlid, testNQN, testHost, 0, 0))
	q2 := dial(t, addr, pdu.Digests{})
	expectStatus(t, "duplicate qid", q2.connect(1, 31, cntlid, testNQN, testHost, 0, 0), pdu.SCCommandSequenceError, true)
	expectStatus(t, "property on io queue", q.propGet(pdu.PropCAP, true), pdu.SCInvalidField, true)
	// Properties (A.3.3): CAP halves, bad offset, bad size.
	lo, hi := h.propGet(0, false), h.propGet(4, false)
	full := h.propGet(0, true)
	if lo.DW0 != full.DW0 || hi.DW0 != full.DW1 || pdu.CAPMQES(uint64(full.DW0)) != 127 {
		t.Fatalf("cap halves %#x %#x vs %#x %#x", lo.DW0, hi.DW0, full.DW0, full.DW1)
	}
	expectStatus(t, "bad property", h.propGet(0x30, false), pdu.SCInvalidField, true)
	expectStatus(t, "set cap", h.propSet(pdu.PropCAP, 1), pdu.SCInvalidField, true)
	// Shutdown (A.3.4): SHN 1 -> SHST complete; the I/O queue goes away.
	mustOK(t, "shutdown", h.propSet(pdu.PropCC, pdu.HostCC(0, true)|pdu.CCShnNormal))
	if c := h.propGet(pdu.PropCSTS, false); c.DW0&pdu.CSTSShstMask != pdu.CSTSShstComplete {
		t.Fatalf("csts after shutdown %#x", c.DW0)
	}
	q.expectClosed()
}

// TestBadCC: enabling with IOSQES 0 on an I/O controller sets CSTS.CFS.
func TestBadCC(t *testing.T) {
	f := newFixture(t, 1, nil)
	h := dial(t, f.t.Addr(0), pdu.Digests{})
	mustOK(t, "connect", h.connect(0, 31, pdu.CNTLIDDynamic, testNQN, testHost, 0, 0))
	mustOK(t, "set cc", h.propSet(pdu.PropCC, pdu.CCEnable))
	if c := h.propGet(pdu.PropCSTS, false); c.DW0&pdu.CSTSFatal == 0 || c.DW0&pdu.CSTSReady != 0 {
		t.Fatalf("csts %#x", c.DW0)
	}
}

// TestKeepAlive: Keep Alive resets the timer; without it the association
// is closed after KATO (A.7.1).
func TestKeepAlive(t *testing.T) {
	f := newFixture(t, 1, nil)
	a := dial(t, f.t.Addr(0), pdu.Digests{})
	cntlid := a.adminUp(1500)
	io := ioUp(t, f.t.Addr(0), pdu.Digests{}, 1, cntlid, 0)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		mustOK(t, "keep alive", a.do(pdu.SQE{Opcode: pdu.AdminKeepAlive}, nil, nil))
	}
	mustOK(t, "io alive", io.do(pdu.SQE{Opcode: pdu.IOFlush, NSID: 1}, nil, nil))
	a.expectClosed() // no more keep-alives
	io.expectClosed()
	if f.t.ctrl(cntlid) != nil {
		t.Fatal("controller still registered")
	}
	b := dial(t, f.t.Addr(0), pdu.Digests{})
	b.adminUp(0)
	expectStatus(t, "keep alive with kato 0", b.do(pdu.SQE{Opcode: pdu.AdminKeepAlive}, nil, nil), pdu.SCKeepAliveInvalid, true)
}

// TestBadInput: malformed PDUs get a C2HTermReq and a closed connection
// (A.1.6); command errors get status codes; the target keeps serving.
func TestBadInput(t *testing.T) {
	f := newFixture(t, 1, func(c *Config) { c.MaxH2CData = 8192 })
	addr := f.t.Addr(0)
	a := dial(t, addr, pdu.Digests{})
	cntlid := a.adminUp(0)
	cases := []struct {
		name string
		dg   pdu.Digests
		send func(h *host)
		fes  uint16
		fei  uint32
	}{
		{"reserved type", pdu.Digests{}, func(h *host) { h.send(hexPad("08 00 18 00 18000000", 24)) }, pdu.FESInvalidHeaderField, 0},
		{"oversized plen", pdu.Digests{}, func(h *host) { h.send(hexPad("04 00 48 48 00000010", 72)) }, pdu.FESDataLimitExceeded, 0},
		{"bad hlen", pdu.Digests{}, func(h *host) { h.send(hexPad("04 00 40 00 40000000", 64)) }, pdu.FESInvalidHeaderField, 2},
		{"controller pdu from host", pdu.Digests{}, func(h *host) { h.send(pdu.AppendR2T(nil, pdu.R2T{R2TL: 1}, pdu.Digests{})) }, pdu.FESInvalidHeaderField, 0},
		{"missing hdgst", pdu.Digests{Header: true}, func(h *host) {
			h.send(pdu.AppendCapsuleCmd(nil, &pdu.SQE{Opcode: pdu.IOFlush}, nil, pdu.Digests{}))
		}, pdu.FESInvalidHeaderField, 1},
		{"bad hdgst", pdu.Digests{Header: true}, func(h *host) {
			b := pdu.AppendCapsuleCmd(nil, &pdu.SQE{Opcode: pdu.IOFlush}, nil, pdu.Digests{Header: true})
			b[72] ^= 1
			h.send(b)
		}, pdu.FESHeaderDigest, 0},
		{"h2cdata unknown ttag", pdu.Digests{}, func(h *host) {
			h.send(pdu.AppendData(nil, pdu.TypeH2CData, pdu.FlagLastPDU, pdu.DataHdr{TTAG: 77}, make([]byte, 8), pdu.Digests{}))
		}, pdu.FESInvalidHeaderField, 10},
		{"second icreq", pdu.Digests{}, func(h *host) { h.send(pdu.ICReq{}.Append(nil)) }, pdu.FESSequenceError, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := dial(t, addr, tc.dg)
			tc.send(h)
			tr := h.expectClosed()
			if tr == nil || tr.FES != tc.fes || (tc.fes != pdu.FESHeaderDigest && tr.FEI != tc.fei) {
				t.Fatalf("termreq %+v, want fes %d fei %d", tr, tc.fes, tc.fei)
			}
		})
	}
	t.Run("first pdu not icreq", func(t *testing.T) {
		h := dialRaw(t, addr)
		h.send(pdu.AppendCapsuleCmd(nil, &pdu.SQE{}, nil, pdu.Digests{}))
		if tr := h.expectClosed(); tr == nil || tr.FES != pdu.FESSequenceError {
			t.Fatalf("termreq %+v", tr)
		}
	})
	t.Run("hpda unsupported", func(t *testing.T) {
		h := dialRaw(t, addr)
		h.send(pdu.ICReq{HPDA: 3}.Append(nil))
		if tr := h.expectClosed(); tr == nil || tr.FES != pdu.FESUnsupportedParameter || tr.FEI != 10 {
			t.Fatalf("termreq %+v", tr)
		}
	})
	t.Run("h2cdata out of order", func(t *testing.T) {
		io := ioUp(t, addr, pdu.Digests{}, 3, cntlid, 0)
		s := rwSQE(pdu.IOWrite, 1, 0, 4, false)
		s.CID = 9
		io.submit(&s, nil)
		r := pdu.ParseR2T(io.read().Hdr)
		io.send(pdu.AppendData(nil, pdu.TypeH2CData, 0, pdu.DataHdr{CCCID: 9, TTAG: r.TTAG, DataO: 4096}, make([]byte, 4096), pdu.Digests{}))
		if tr := io.expectClosed(); tr == nil || tr.FES != pdu.FESDataOutOfRange {
			t.Fatalf("termreq %+v", tr)
		}
	})
	t.Run("data digest error", func(t *testing.T) {
		dg := pdu.Digests{Data: true}
		io := ioUp(t, addr, dg, 4, cntlid, 0)
		s := rwSQE(pdu.IOWrite, 1, 0, 1, true)
		s.CID = 5
		b := pdu.AppendCapsuleCmd(nil, &s, make([]byte, nsBS), dg)
		b[len(b)-1] ^= 0xFF
		io.send(b)
		c := pdu.ParseCapsuleResp(io.read().Hdr)
		expectStatus(t, "digest error", c, pdu.SCTransientTransport, false)
		mustOK(t, "next command", io.do(pdu.SQE{Opcode: pdu.IOFlush, NSID: 1}, nil, nil))
	})
	t.Run("oversized in-capsule", func(t *testing.T) {
		io := ioUp(t, addr, pdu.Digests{}, 5, cntlid, 0)
		s := rwSQE(pdu.IOWrite, 1, 0, 33, true) // 132 KiB > 128 KiB in-capsule
		c := io.do(s, make([]byte, 33*nsBS), nil)
		expectStatus(t, "too big in capsule", c, pdu.SCSGLOffsetInvalid, true)
		bad := pdu.SQE{Opcode: pdu.IORead, NSID: 1, SGL: pdu.SGL{Length: nsBS, ID: 0x20}}
		expectStatus(t, "sgl type", io.do(bad, nil, nil), pdu.SCSGLTypeInvalid, true)
	})
	// The admin connection and new ones still work.
	mustOK(t, "admin alive", a.do(pdu.FeaturesSQE(0, false, pdu.FeatNumQueues, 0), nil, nil))
	expectStatus(t, "unknown admin opcode", a.do(pdu.SQE{Opcode: 0x55}, nil, nil), pdu.SCInvalidOpcode, true)
	expectStatus(t, "bad log", func() pdu.CQE { _, c := a.getLog(0x42, 0, 512, 0); return c }(), pdu.SCInvalidField, true)
	expectStatus(t, "bad feature", a.do(pdu.FeaturesSQE(0, true, 0x55, 0), nil, nil), pdu.SCInvalidField, true)
	io := ioUp(t, addr, pdu.Digests{}, 2, cntlid, 0)
	mustOK(t, "io still works", io.do(rwSQE(pdu.IORead, 1, 0, 1, false), nil, make([]byte, nsBS)))
}

func hexPad(s string, n int) []byte {
	b := []byte{}
	for _, f := range strings.Fields(s) {
		for i := 0; i+2 <= len(f); i += 2 {
			var v byte
			for _, ch := range f[i : i+2] {
				v <<= 4
				switch {
				case ch >= '0' && ch <= '9':
					v |= byte(ch - '0')
				default:
					v |= byte(ch-'a') + 10
				}
			}
			b = append(b, v)
		}
	}
	return append(b, make([]byte, n-len(b))...)
}

// TestFaults exercises the fault hooks.
func TestFaults(t *testing.T) {
	f := newFixture(t, 2, nil)
	a := dial(t, f.t.Addr(0), pdu.Digests{})
	cntlid := a.adminUp(0)
	io := ioUp(t, f.t.Addr(0), pdu.Digests{}, 1, cntlid, 0)
	fl := f.t.Faults()
	fl.FailIO(IOFault{NSID: 1, Op: FaultRead, Status: pdu.SCUnrecoveredReadError, Count: 1})
	expectStatus(t, "injected", io.do(rwSQE(pdu.IORead, 1, 0, 1, false), nil, make([]byte, nsBS)), pdu.SCUnrecoveredReadError, false)
	mustOK(t, "count exhausted", io.do(rwSQE(pdu.IORead, 1, 0, 1, false), nil, make([]byte, nsBS)))
	fl.FailIO(IOFault{Op: FaultWrite, Status: pdu.SCNamespaceNotReady})
	expectStatus(t, "write fault", io.do(rwSQE(pdu.IOWrite, 2, 0, 1, true), make([]byte, nsBS), nil), pdu.SCNamespaceNotReady, false)
	fl.SetLatency(time.Millisecond)
	mustOK(t, "read unaffected", io.do(rwSQE(pdu.IORead, 2, 0, 1, false), nil, make([]byte, nsBS)))
	fl.Clear()
	mustOK(t, "cleared", io.do(rwSQE(pdu.IOWrite, 2, 0, 1, true), make([]byte, nsBS), nil))

	// Freeze: nothing is answered until Thaw.
	if err := fl.Freeze(0); err != nil {
		t.Fatal(err)
	}
	s := pdu.SQE{Opcode: pdu.IOFlush, NSID: 1, CID: 0x99, Flags: pdu.PSDTSGL}
	io.submit(&s, nil)
	io.nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := io.tryRead(); err == nil || !isTimeout(err) {
		t.Fatalf("frozen connection answered: %v", err)
	}
	io.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	fl.Thaw(0)
	if c := pdu.ParseCapsuleResp(io.read().Hdr); c.CID != 0x99 {
		t.Fatalf("after thaw: %+v", c)
	}
	// Drop connections of listener 0: both queues see EOF.
	if n, _ := fl.DropConnections(0); n != 2 {
		t.Fatalf("dropped %d connections", n)
	}
	a.expectClosed()
	io.expectClosed()
	// Stop and restart listener 1 on the same port.
	addr1 := f.t.Addr(1)
	mustOK(t, "listener 1", dial(t, addr1, pdu.Digests{}).connect(0, 31, pdu.CNTLIDDynamic, testNQN, testHost, 0, 0))
	if err := fl.StopListener(1); err != nil {
		t.Fatal(err)
	}
	if nc, err := net.DialTimeout("tcp", addr1, time.Second); err == nil {
		nc.Close()
		t.Fatal("stopped listener accepted")
	}
	if err := fl.StartListener(1); err != nil {
		t.Fatal(err)
	}
	if f.t.Addr(1) != addr1 {
		t.Fatalf("restarted on %s, want %s", f.t.Addr(1), addr1)
	}
	dial(t, addr1, pdu.Digests{}).adminUp(0)
}

// TestCloseReleases: Close with live connections and I/O in flight returns
// and leaves no goroutines behind.
func TestCloseReleases(t *testing.T) {
	before := runtime.NumGoroutine()
	f := newFixture(t, 2, nil)
	f.t.Faults().SetLatency(50 * time.Millisecond)
	for i := 0; i < 2; i++ {
		a := dial(t, f.t.Addr(i), pdu.Digests{})
		cntlid := a.adminUp(1000)
		io := ioUp(t, f.t.Addr(i), pdu.Digests{}, 1, cntlid, 0)
		for j := 0; j < 8; j++ {
			s := rwSQE(pdu.IORead, 1, uint64(j), 1, false)
			s.CID, s.Flags = uint16(j), pdu.PSDTSGL
			io.submit(&s, nil)
		}
		dialRaw(t, f.t.Addr(i)) // a connection that never sends its ICReq
	}
	if err := f.t.Close(); err != nil {
		t.Fatal(err)
	}
	f.t.Close()
	testutil.WaitGoroutines(t, before+1)
	if err := f.t.Start(t.Context()); err == nil {
		t.Fatal("restart after Close accepted")
	}
}

// controlDo sends a control request with the bearer token tok (none when
// empty) and extra headers (key, value pairs); it returns the status.
func controlDo(t *testing.T, method, url, ctype, body, tok string, headers ...string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestControlHandler(t *testing.T) {
	f := newFixture(t, 2, nil)
	srv := httptest.NewServer(f.t.ControlHandler("tok"))
	defer srv.Close()
	post := func(ctype, body string) int {
		t.Helper()
		return controlDo(t, http.MethodPost, srv.URL+"/v1/ana", ctype, body, "tok")
	}
	if code := post("application/json", `{"listener":"`+f.t.Addr(1)+`","group":2,"state":"inaccessible"}`); code != 200 {
		t.Fatalf("json post: %d", code)
	}
	if st, _ := f.t.ANAState(1, 2); st != pdu.ANAInaccessible {
		t.Fatalf("state %v", st)
	}
	for _, b := range []string{`{"listener":"0","group":2,"state":"bogus"}`, `{"listener":"9","group":1,"state":"change"}`,
		`{"listener":"0","group":77,"state":"change"}`, `{"listener":"0","group":1,"state":"change","extra":1}`, `{`} {
		if code := post("application/json", b); code != 400 {
			t.Fatalf("%s: %d, want 400", b, code)
		}
	}
	es, err := ControlClient{Addr: strings.TrimPrefix(srv.URL, "http://"), Token: "tok"}.ANAStates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 4 || es[3].State != "inaccessible" {
		t.Fatalf("entries %+v", es)
	}
}

// TestControlFormPost: what a cross-site HTML form can send (a POST with
// a form body or a query string, form or text content types) changes
// nothing, even with the token.
func TestControlFormPost(t *testing.T) {
	f := newFixture(t, 1, nil)
	srv := httptest.NewServer(f.t.ControlHandler("tok"))
	defer srv.Close()
	form := url.Values{"listener": {"0"}, "group": {"1"}, "state": {"inaccessible"}}
	tries := []struct{ path, ctype, body string }{
		{"/v1/ana?" + form.Encode(), "", ""},
		{"/v1/ana?" + form.Encode(), "application/json", `{"listener":"0","group":1,"state":"inaccessible"}`},
		{"/v1/ana", "application/x-www-form-urlencoded", form.Encode()},
		{"/v1/ana", "text/plain", `{"listener":"0","group":1,"state":"inaccessible"}`},
		{"/v1/ana", "multipart/form-data; boundary=x", "--x\r\n"},
	}
	for _, try := range tries {
		if code := controlDo(t, http.MethodPost, srv.URL+try.path, try.ctype, try.body, "tok"); code != http.StatusBadRequest {
			t.Errorf("%s %q: %d, want 400", try.path, try.ctype, code)
		}
	}
	if st, _ := f.t.ANAState(0, 1); st != pdu.ANAOptimized {
		t.Fatalf("state after the form posts: %v", st)
	}
}

// TestControlAccess: the control API is served only with a token, on
// loopback too; a request without it, with a wrong one, with a Host
// header naming a host by name (DNS rebinding) or with an Origin header
// (a web page) is refused even on loopback, and changes nothing; the
// right token changes the state. Before, a loopback control API served
// anyone without a token, whatever the Host header.
func TestControlAccess(t *testing.T) {
	f := newFixture(t, 1, nil)
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", ":0", "0.0.0.0:0"} {
		if _, _, err := f.t.ServeControl(addr, ""); !errors.Is(err, ErrControlToken) {
			t.Errorf("ServeControl(%q) without a token: %v, want ErrControlToken", addr, err)
		}
	}
	addr, stop, err := f.t.ServeControl("127.0.0.1:0", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	_, port, _ := net.SplitHostPort(addr)
	url := "http://" + addr + "/v1/ana"
	body := `{"listener":"0","group":1,"state":"inaccessible"}`
	tries := []struct {
		what    string
		tok     string
		headers []string
		want    int
	}{
		{"no token", "", nil, http.StatusUnauthorized},
		{"wrong token", "wrong", nil, http.StatusUnauthorized},
		{"foreign Host", "s3cret", []string{"Host", "attacker.example:" + port}, http.StatusForbidden},
		{"foreign Host without a port", "s3cret", []string{"Host", "attacker.example"}, http.StatusForbidden},
		{"an Origin", "s3cret", []string{"Origin", "http://attacker.example"}, http.StatusForbidden},
	}
	for _, try := range tries {
		if code := controlDo(t, http.MethodPost, url, "application/json", body, try.tok, try.headers...); code != try.want {
			t.Errorf("POST with %s: %d, want %d", try.what, code, try.want)
		}
		if code := controlDo(t, http.MethodGet, url, "", "", try.tok, try.headers...); code != try.want {
			t.Errorf("GET with %s: %d, want %d", try.what, code, try.want)
		}
	}
	if st, _ := f.t.ANAState(0, 1); st != pdu.ANAOptimized {
		t.Fatalf("state after refused posts: %v", st)
	}
	if err := (ControlClient{Addr: addr}).SetANAState(t.Context(), "0", 1, "inaccessible"); !errors.Is(err, ErrControlToken) {
		t.Errorf("client without a token: %v, want ErrControlToken before sending", err)
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "[::1]", "127.0.0.1"} {
		if code := controlDo(t, http.MethodGet, url, "", "", "s3cret", "Host", host); code != http.StatusOK {
			t.Errorf("GET with Host %s and the token: %d, want 200", host, code)
		}
	}
	if err := (ControlClient{Addr: addr, Token: "s3cret"}).SetANAState(t.Context(), "0", 1, "inaccessible"); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.t.ANAState(0, 1); st != pdu.ANAInaccessible {
		t.Fatalf("state with the token: %v", st)
	}
}

// TestResourceLimits: a host that opens more R2T transfers than twice the
// queue size without sending data gets Transient Transport Error instead
// of tying up unbounded memory.
func TestResourceLimits(t *testing.T) {
	f := newFixture(t, 1, func(c *Config) { c.QueueSize = 8 })
	a := dial(t, f.t.Addr(0), pdu.Digests{})
	cntlid := a.adminUp(0)
	io := dial(t, f.t.Addr(0), pdu.Digests{})
	mustOK(t, "io connect", io.connect(1, 7, cntlid, testNQN, testHost, 0, 0))
	for i := 0; i < 16; i++ {
		s := rwSQE(pdu.IOWrite, 1, uint64(i), 1, false)
		s.CID, s.Flags = uint16(i), pdu.PSDTSGL
		io.submit(&s, nil)
		if p := io.read(); p.Header.Type != pdu.TypeR2T {
			t.Fatalf("command %d: %v", i, p.Header.Type)
		}
	}
	expectStatus(t, "17th transfer", io.do(rwSQE(pdu.IOWrite, 1, 20, 1, false), nil, nil), pdu.SCTransientTransport, false)
}
