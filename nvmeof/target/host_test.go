package target

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// The tests drive the target with hand-built PDUs through this minimal
// host. Section numbers refer to the NVM Express TCP Transport Specification.

const (
	testNQN  = "nqn.2026-01.io.nvstripe:test"
	testHost = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000001"
	nsBS     = 4096
	nsSize   = 4 << 20
)

type fixture struct {
	t    *Target
	devs []*blockdev.Mem
}

// newFixture starts a target on 127.0.0.1 with nl listeners and two
// namespaces (NSID 1 in ANA group 1, NSID 2 in group 2).
func newFixture(tb testing.TB, nl int, mod func(*Config)) *fixture {
	tb.Helper()
	return newFixtureWrapped(tb, nl, mod, nil)
}

// newFixtureWrapped is newFixture with every listener wrapped by wrap.
func newFixtureWrapped(tb testing.TB, nl int, mod func(*Config), wrap func(net.Listener) net.Listener) *fixture {
	tb.Helper()
	f := &fixture{}
	var nss []NamespaceConfig
	for i := 1; i <= 2; i++ {
		d, err := blockdev.NewMem(nsSize, nsBS)
		if err != nil {
			tb.Fatal(err)
		}
		f.devs = append(f.devs, d)
		nss = append(nss, NamespaceConfig{NSID: uint32(i), Device: d, ANAGroup: uint32(i)})
	}
	cfg := Config{
		Subsystems: []SubsystemConfig{
			{NQN: testNQN, Namespaces: nss, AllowedHosts: []string{testHost}},
			{NQN: testNQN + "-other", AllowedHosts: []string{"nqn.someone-else"}},
		},
	}
	for i := 0; i < nl; i++ {
		cfg.Listeners = append(cfg.Listeners, ListenerConfig{Address: "127.0.0.1:0"})
	}
	if mod != nil {
		mod(&cfg)
	}
	t, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	t.wrapListener = wrap
	if err := t.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	f.t = t
	tb.Cleanup(func() { t.Close() })
	return f
}

// host is a hand-driven NVMe/TCP host connection.
type host struct {
	tb     testing.TB
	nc     net.Conn
	br     *bufio.Reader
	dg     pdu.Digests
	maxH2C uint32
	cid    uint16
	buf    []byte
	qid    uint16
}

func dialRaw(tb testing.TB, addr string) *host {
	tb.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	return newHost(tb, nc)
}

// newHost is a host on the connection nc, which must answer within 30s.
func newHost(tb testing.TB, nc net.Conn) *host {
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	return &host{tb: tb, nc: nc, br: bufio.NewReaderSize(nc, 256<<10)}
}

// dial connects and does the ICReq/ICResp exchange (A.1.5).
func dial(tb testing.TB, addr string, dg pdu.Digests) *host {
	tb.Helper()
	return initConn(dialRaw(tb, addr), dg)
}

// initConn does the ICReq/ICResp exchange (A.1.5) on h.
func initConn(h *host, dg pdu.Digests) *host {
	tb := h.tb
	tb.Helper()
	h.send(pdu.ICReq{Digests: dg}.Append(nil))
	p := h.read()
	if p.Header.Type != pdu.TypeICResp || p.Header.PLen != 128 {
		tb.Fatalf("icresp: %+v", p.Header)
	}
	r := pdu.ParseICResp(p.Hdr)
	if r.PFV != 0 || r.CPDA != 0 || r.Digests != dg || r.MaxH2CData < 4096 || r.MaxH2CData%4 != 0 {
		tb.Fatalf("icresp fields violate A.8 item 1: %+v", r)
	}
	h.dg, h.maxH2C = dg, r.MaxH2CData
	return h
}

func (h *host) send(b []byte) {
	h.tb.Helper()
	if _, err := h.nc.Write(b); err != nil {
		h.tb.Fatalf("write: %v", err)
	}
}

// read returns the next PDU (copied).
func (h *host) read() pdu.PDU {
	h.tb.Helper()
	p, err := h.tryRead()
	if err != nil {
		h.tb.Fatalf("read pdu: %v", err)
	}
	return p
}

func (h *host) tryRead() (pdu.PDU, error) {
	p, buf, err := pdu.ReadPDU(h.br, h.buf, -1, h.dg)
	h.buf = buf
	if err != nil {
		return p, err
	}
	out := pdu.PDU{Header: p.Header, Hdr: append([]byte(nil), p.Hdr...), Data: append([]byte(nil), p.Data...)}
	if p.Header.Type == pdu.TypeC2HData && p.Header.PDO != uint8(24+p.Header.HDigestLen()) {
		return out, fmt.Errorf("c2hdata padded (pdo %d): A.8 item 2", p.Header.PDO)
	}
	return out, nil
}

// expectClosed reads until EOF, failing on anything but a C2HTermReq.
func (h *host) expectClosed() *pdu.TermReq {
	h.tb.Helper()
	var tr *pdu.TermReq
	for {
		p, err := h.tryRead()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
				return tr
			}
			h.tb.Fatalf("waiting for close: %v", err)
		}
		if p.Header.Type != pdu.TypeC2HTermReq {
			h.tb.Fatalf("waiting for close: got %v", p.Header.Type)
		}
		r := pdu.ParseTermReq(p.Hdr, p.Data)
		tr = &r
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

func (h *host) nextCID() uint16 {
	h.cid++
	return h.cid | 0x3000 // generation bits must be echoed verbatim (A.1.12)
}

// submit sends a command; out is sent in-capsule when the SGL says so.
func (h *host) submit(sqe *pdu.SQE, out []byte) {
	h.tb.Helper()
	if sqe.SGL.ID == pdu.SGLInCapsule {
		h.send(pdu.AppendCapsuleCmd(nil, sqe, out, h.dg))
	} else {
		h.send(pdu.AppendCapsuleCmd(nil, sqe, nil, h.dg))
	}
}

// do runs one command to completion: it answers R2Ts with out, gathers
// C2HData into in, and returns the CQE (synthesised for SUCCESS).
func (h *host) do(sqe pdu.SQE, out, in []byte) pdu.CQE {
	h.tb.Helper()
	sqe.CID = h.nextCID()
	if sqe.Flags == 0 {
		sqe.Flags = pdu.PSDTSGL
	}
	h.submit(&sqe, out)
	for {
		cqe, done := h.handle(h.read(), map[uint16][]byte{sqe.CID: out}, map[uint16][]byte{sqe.CID: in})
		if done {
			if cqe.CID != sqe.CID {
				h.tb.Fatalf("completion for cid %#x, want %#x", cqe.CID, sqe.CID)
			}
			return cqe
		}
	}
}

// handle processes one PDU for commands in flight; done is true for a
// completion.
func (h *host) handle(p pdu.PDU, outs, ins map[uint16][]byte) (pdu.CQE, bool) {
	h.tb.Helper()
	switch p.Header.Type {
	case pdu.TypeCapsuleResp:
		return pdu.ParseCapsuleResp(p.Hdr), true
	case pdu.TypeC2HData:
		d := pdu.ParseDataHdr(p.Hdr)
		in, ok := ins[d.CCCID]
		if !ok || int(d.DataO)+len(p.Data) > len(in) {
			h.tb.Fatalf("c2hdata for cid %#x [%d,+%d) does not fit", d.CCCID, d.DataO, len(p.Data))
		}
		copy(in[d.DataO:], p.Data)
		if p.Header.Flags&pdu.FlagSuccess != 0 {
			return pdu.CQE{CID: d.CCCID, SQID: h.qid}, true
		}
	case pdu.TypeR2T:
		r := pdu.ParseR2T(p.Hdr)
		out, ok := outs[r.CCCID]
		if !ok || r.R2TL == 0 || int(r.R2TO+r.R2TL) > len(out) {
			h.tb.Fatalf("r2t %+v violates A.1.12", r)
		}
		h.sendH2C(r, out)
	default:
		h.tb.Fatalf("unexpected %v", p.Header.Type)
	}
	return pdu.CQE{}, false
}

func (h *host) sendH2C(r pdu.R2T, out []byte) {
	var b []byte
	for off := r.R2TO; off < r.R2TO+r.R2TL; {
		n := min(h.maxH2C, r.R2TO+r.R2TL-off)
		flags := pdu.Flags(0)
		if off+n == r.R2TO+r.R2TL {
			flags = pdu.FlagLastPDU
		}
		b = pdu.AppendData(b, pdu.TypeH2CData, flags, pdu.DataHdr{CCCID: r.CCCID, TTAG: r.TTAG, DataO: off}, out[off:off+n], h.dg)
		off += n
	}
	h.send(b)
}

func mustOK(tb testing.TB, what string, c pdu.CQE) {
	tb.Helper()
	if !c.Status.Success() {
		tb.Fatalf("%s: status %v", what, c.Status)
	}
}

func expectStatus(tb testing.TB, what string, c pdu.CQE, code pdu.StatusCode, dnr bool) {
	tb.Helper()
	if c.Status.Code() != code || c.Status.DNR() != dnr {
		tb.Fatalf("%s: status %v (%#04x), want %v dnr=%t", what, c.Status, uint16(c.Status), code, dnr)
	}
}

// connect sends a Connect (A.3.2) and returns its completion.
func (h *host) connect(qid, sqsize uint16, cntlid uint16, subnqn, hostnqn string, kato uint32, cattr uint8) pdu.CQE {
	h.tb.Helper()
	cd := pdu.ConnectData{CNTLID: cntlid, SubNQN: subnqn, HostNQN: hostnqn}
	cd.HostID[0] = 1
	sqe := pdu.ConnectCmd{QID: qid, SQSize: sqsize, KATO: kato, CAttr: cattr}.SQE(0)
	c := h.do(sqe, cd.Marshal(), nil)
	if c.Status.Success() {
		h.qid = qid
	}
	return c
}

func (h *host) propGet(off uint32, size8 bool) pdu.CQE {
	return h.do(pdu.PropertyCmd{Offset: off, Size8: size8}.GetSQE(0), nil, nil)
}

func (h *host) propSet(off uint32, v uint32) pdu.CQE {
	return h.do(pdu.PropertyCmd{Offset: off, Value: uint64(v)}.SetSQE(0), nil, nil)
}

// enable runs the Linux enable sequence (A.3.4 steps 3-8).
func (h *host) enable(iosqes bool) {
	h.tb.Helper()
	c := h.propGet(pdu.PropCAP, true)
	mustOK(h.tb, "get cap", c)
	capv := uint64(c.DW0) | uint64(c.DW1)<<32
	if capv&pdu.CAPCSSIOCS != 0 {
		h.tb.Fatalf("CAP advertises CSS bit 43 (A.8 item 9): %#x", capv)
	}
	cc := pdu.HostCC(0, false)
	if !iosqes {
		cc = 0
	}
	mustOK(h.tb, "set cc en=0", h.propSet(pdu.PropCC, cc))
	mustOK(h.tb, "set cc en=1", h.propSet(pdu.PropCC, cc|pdu.CCEnable))
	c = h.propGet(pdu.PropCSTS, false)
	if !c.Status.Success() || c.DW0&pdu.CSTSReady == 0 || c.DW0&pdu.CSTSFatal != 0 {
		h.tb.Fatalf("csts after enable: %v %#x", c.Status, c.DW0)
	}
	mustOK(h.tb, "get vs", h.propGet(pdu.PropVS, false))
}

// adminUp connects an admin queue and enables the controller; it returns
// the controller ID.
func (h *host) adminUp(kato uint32) uint16 {
	h.tb.Helper()
	c := h.connect(0, 31, pdu.CNTLIDDynamic, testNQN, testHost, kato, 0)
	mustOK(h.tb, "admin connect", c)
	h.enable(true)
	return uint16(c.DW0)
}

func (h *host) identify(cns uint8, nsid uint32) ([]byte, pdu.CQE) {
	in := make([]byte, pdu.IdentifyDataLen)
	c := h.do(pdu.IdentifySQE(0, cns, nsid), nil, in)
	return in, c
}

func (h *host) getLog(lid uint8, lsp uint8, n int, off uint64) ([]byte, pdu.CQE) {
	in := make([]byte, n)
	g := pdu.GetLogPageCmd{LID: lid, LSP: lsp, NumD: uint32(n / 4), Offset: off}
	c := h.do(g.SQE(0, 0xFFFFFFFF), nil, in)
	return in, c
}

func rwSQE(op uint8, nsid uint32, slba uint64, nlb uint32, inCapsule bool) pdu.SQE {
	s := pdu.SQE{Opcode: op, NSID: nsid, SGL: pdu.SGL{Length: nlb * nsBS, ID: pdu.SGLTransport}}
	if inCapsule {
		s.SGL.ID = pdu.SGLInCapsule
	}
	s.SetRW(slba, nlb)
	return s
}

// ioUp connects I/O queue qid of controller cntlid.
func ioUp(tb testing.TB, addr string, dg pdu.Digests, qid, cntlid uint16, cattr uint8) *host {
	tb.Helper()
	h := dial(tb, addr, dg)
	mustOK(tb, "io connect", h.connect(qid, 127, cntlid, testNQN, testHost, 0, cattr))
	return h
}
