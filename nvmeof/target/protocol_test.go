package target

import (
	"bytes"
	"context"
	"math/rand"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

func memRead(tb testing.TB, f *fixture, i int, off int64, n int) []byte {
	b := make([]byte, n)
	if err := f.devs[i].ReadAt(context.Background(), b, off); err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestBringUp follows the Linux host bring-up (A.3.4) and namespace scan
// (A.4.3), checking the Identify fields the host validates (A.4.2, A.8
// items 6-11), then runs I/O over an I/O queue, with and without digests.
func TestBringUp(t *testing.T) {
	for _, dg := range []pdu.Digests{{}, {Header: true, Data: true}, {Header: true}, {Data: true}} {
		t.Run(digestName(dg), func(t *testing.T) {
			f := newFixture(t, 1, func(c *Config) {
				c.MaxH2CData = 4096    // several H2CData PDUs per R2T
				c.MaxR2TLength = 16384 // several R2Ts per write
			})
			addr := f.t.Addr(0)
			a := dial(t, addr, dg)
			cntlid := a.adminUp(5000)
			checkIdentifyController(t, a, cntlid)
			checkNamespaceScan(t, a)
			checkANALog(t, a, pdu.ANAOptimized)
			c := a.do(pdu.FeaturesSQE(0, true, pdu.FeatNumQueues, pdu.NumQueues(4, 4)), nil, nil)
			mustOK(t, "set num queues", c)
			if s, q := pdu.ParseNumQueues(c.DW0); s < 1 || q < 1 {
				t.Fatalf("num queues granted %#x", c.DW0)
			}
			mustOK(t, "set aec", a.do(pdu.FeaturesSQE(0, true, pdu.FeatAsyncEvent, pdu.OAESANA|pdu.OAESNSAttr), nil, nil))
			mustOK(t, "keep alive", a.do(pdu.SQE{Opcode: pdu.AdminKeepAlive}, nil, nil))
			io := ioUp(t, addr, dg, 1, cntlid, 0)
			runIOChecks(t, f, io)
		})
	}
}

func digestName(dg pdu.Digests) string {
	return map[pdu.Digests]string{{}: "none", {Header: true}: "hdgst", {Data: true}: "ddgst", {Header: true, Data: true}: "both"}[dg]
}

func checkIdentifyController(t *testing.T, a *host, cntlid uint16) {
	b, c := a.identify(pdu.CNSController, 0)
	mustOK(t, "identify controller", c)
	id, _ := pdu.ParseIdentifyController(b)
	switch {
	case id.CNTLID != cntlid:
		t.Errorf("CNTLID %d, connect returned %d", id.CNTLID, cntlid)
	case id.KAS == 0:
		t.Errorf("KAS 0")
	case id.SGLS&3 == 0:
		t.Errorf("SGLS %#x: mandatory sgls missing", id.SGLS)
	case id.ICDOFF != 0 || id.IOCCSZ < 68 || id.IORCSZ < 1 || id.MAXCMD == 0:
		t.Errorf("capsule sizes icdoff %d ioccsz %d iorcsz %d maxcmd %d", id.ICDOFF, id.IOCCSZ, id.IORCSZ, id.MAXCMD)
	case id.SQES != 0x66 || id.CQES != 0x44:
		t.Errorf("sqes/cqes %#x/%#x", id.SQES, id.CQES)
	case id.CMIC != 0x0B || id.MNAN == 0 || id.MNAN > id.NN:
		t.Errorf("cmic %#x mnan %d nn %d", id.CMIC, id.MNAN, id.NN)
	case id.SubNQN != testNQN || id.CNTRLTYPE != pdu.CtrlTypeIO:
		t.Errorf("subnqn %q cntrltype %d", id.SubNQN, id.CNTRLTYPE)
	case id.OAES&pdu.OAESANA == 0 || id.ANAGRPMAX == 0 || id.NANAGRPID == 0 || id.ANACAP&0x1F != 0x1F:
		t.Errorf("ana fields oaes %#x grpmax %d ngrp %d anacap %#x", id.OAES, id.ANAGRPMAX, id.NANAGRPID, id.ANACAP)
	case id.ONCS&(pdu.ONCSDSM|pdu.ONCSWriteZeroes) != pdu.ONCSDSM|pdu.ONCSWriteZeroes || id.VWC&1 == 0:
		t.Errorf("oncs %#x vwc %#x", id.ONCS, id.VWC)
	}
	// A.4.2: the host's ANA log buffer must fit in MDTS.
	if need := 16 + 32*int(id.NANAGRPID) + 4*int(id.MNAN); id.MDTS != 0 && need > 4096<<id.MDTS {
		t.Errorf("ana log of %d bytes does not fit mdts %d", need, id.MDTS)
	}
	if id.SN == "" || len(id.MN) == 0 || id.VER < pdu.MakeVersion(1, 3, 0) {
		t.Errorf("sn %q mn %q ver %#x", id.SN, id.MN, id.VER)
	}
}

func checkNamespaceScan(t *testing.T, a *host) {
	b, c := a.identify(pdu.CNSActiveNSList, 0)
	mustOK(t, "active ns list", c)
	if ids := pdu.ParseNSList(b); len(ids) != 2 || ids[0] != 1 || ids[1] != 2 {
		t.Fatalf("active ns list %v", ids)
	}
	if b, _ = a.identify(pdu.CNSActiveNSList, 1); len(pdu.ParseNSList(b)) != 1 {
		t.Fatalf("active ns list after 1: %v", pdu.ParseNSList(b))
	}
	b, c = a.identify(pdu.CNSNSDescList, 1)
	mustOK(t, "ns desc list", c)
	ds, err := pdu.ParseNSDescList(b)
	if err != nil || len(ds) != 3 || ds[0].Type != pdu.NIDTUUID || ds[2].Type != pdu.NIDTCSI {
		t.Fatalf("descriptors %+v %v", ds, err)
	}
	u, g := DeriveNamespaceIDs(testNQN, 1, "ns1")
	if !bytes.Equal(ds[0].ID, u[:]) || !bytes.Equal(ds[1].ID, g[:]) {
		t.Fatalf("ids not the derived stable ones")
	}
	b, c = a.identify(pdu.CNSNamespace, 1)
	mustOK(t, "identify ns", c)
	ns, _ := pdu.ParseIdentifyNamespace(b)
	if ns.NSZE != nsSize/nsBS || ns.NCAP != ns.NSZE || ns.BlockSize() != nsBS || ns.NMIC&1 == 0 || ns.ANAGRPID != 1 || ns.NGUID != g {
		t.Fatalf("identify ns %+v", ns)
	}
	b, c = a.identify(pdu.CNSNamespace, 7)
	if mustOK(t, "inactive ns", c); !bytes.Equal(b, make([]byte, 4096)) {
		t.Fatalf("inactive namespace data not zero")
	}
	_, c = a.identify(pdu.CNSIndependentNS, 2)
	mustOK(t, "cns 08h", c)
	_, c = a.identify(0x1F, 0)
	expectStatus(t, "bad cns", c, pdu.SCInvalidField, true)
}

func checkANALog(t *testing.T, a *host, want pdu.ANAState) {
	b, c := a.getLog(pdu.LogANA, 0, 16+32*MaxANAGroups+4*MaxNamespaces, 0)
	mustOK(t, "ana log", c)
	l, err := pdu.ParseANALog(b, MaxANAGroups)
	if err != nil || len(l.Groups) != 2 {
		t.Fatalf("ana log %+v %v", l, err)
	}
	if g := l.Groups[0]; g.GroupID != 1 || g.State != want || len(g.NSIDs) != 1 || g.NSIDs[0] != 1 {
		t.Fatalf("group 1 %+v", g)
	}
}

func runIOChecks(t *testing.T, f *fixture, io *host) {
	// In-capsule write (A.2.3 SGL 0x01), then read back (C2HData).
	w := testutil.Pattern(2*nsBS, 1)
	mustOK(t, "write in-capsule", io.do(rwSQE(pdu.IOWrite, 1, 3, 2, true), w, nil))
	if !bytes.Equal(memRead(t, f, 0, 3*nsBS, len(w)), w) {
		t.Fatal("in-capsule write did not reach the device")
	}
	r := make([]byte, len(w))
	mustOK(t, "read", io.do(rwSQE(pdu.IORead, 1, 3, 2, false), nil, r))
	if !bytes.Equal(r, w) {
		t.Fatal("read back differs")
	}
	// R2T write (A.1.12): 64 KiB, so several R2Ts and H2CData PDUs.
	w = testutil.Pattern(16*nsBS, 2)
	mustOK(t, "write r2t", io.do(rwSQE(pdu.IOWrite, 2, 100, 16, false), w, nil))
	if !bytes.Equal(memRead(t, f, 1, 100*nsBS, len(w)), w) {
		t.Fatal("r2t write did not reach the device")
	}
	r = make([]byte, len(w))
	mustOK(t, "read 64k", io.do(rwSQE(pdu.IORead, 2, 100, 16, false), nil, r))
	if !bytes.Equal(r, w) {
		t.Fatal("64k read back differs")
	}
	mustOK(t, "flush", io.do(pdu.SQE{Opcode: pdu.IOFlush, NSID: 1}, nil, nil))
	mustOK(t, "flush all", io.do(pdu.SQE{Opcode: pdu.IOFlush, NSID: 0xFFFFFFFF}, nil, nil))
	wz := rwSQE(pdu.IOWriteZeroes, 2, 101, 2, false)
	wz.SGL = pdu.SGL{ID: pdu.SGLTransport}
	mustOK(t, "write zeroes", io.do(wz, nil, nil))
	if got := memRead(t, f, 1, 100*nsBS, 4*nsBS); !bytes.Equal(got[nsBS:3*nsBS], make([]byte, 2*nsBS)) || !bytes.Equal(got[:nsBS], w[:nsBS]) || !bytes.Equal(got[3*nsBS:], w[3*nsBS:4*nsBS]) {
		t.Fatal("write zeroes range wrong")
	}
	ranges := pdu.AppendDSMRanges(nil, []pdu.DSMRange{{NLB: 2, SLBA: 110}, {NLB: 1, SLBA: 114}})
	dsm := pdu.SQE{Opcode: pdu.IODSM, NSID: 2, CDW10: 1, CDW11: pdu.DSMDeallocate, SGL: pdu.SGL{Length: uint32(len(ranges)), ID: pdu.SGLInCapsule}}
	mustOK(t, "dsm deallocate", io.do(dsm, ranges, nil))
	got := memRead(t, f, 1, 110*nsBS, 5*nsBS)
	if !bytes.Equal(got[:2*nsBS], make([]byte, 2*nsBS)) || !bytes.Equal(got[2*nsBS:4*nsBS], w[12*nsBS:14*nsBS]) || !bytes.Equal(got[4*nsBS:], make([]byte, nsBS)) {
		t.Fatal("dsm deallocate range wrong")
	}
	expectStatus(t, "read past end", io.do(rwSQE(pdu.IORead, 1, nsSize/nsBS-1, 2, false), nil, make([]byte, 2*nsBS)), pdu.SCLBAOutOfRange, true)
	expectStatus(t, "unknown opcode", io.do(pdu.SQE{Opcode: 0x7E, NSID: 1}, nil, nil), pdu.SCInvalidOpcode, true)
	expectStatus(t, "bad nsid", io.do(rwSQE(pdu.IORead, 9, 0, 1, false), nil, make([]byte, nsBS)), pdu.SCInvalidNamespace, true)
	bad := rwSQE(pdu.IORead, 1, 0, 2, false)
	bad.SGL.Length = nsBS
	expectStatus(t, "sgl length", io.do(bad, nil, make([]byte, nsBS)), pdu.SCDataSGLLengthInvalid, true)
}

// TestManyInFlight keeps 64 commands outstanding on one queue, mixed reads
// and writes, and checks every completion.
func TestManyInFlight(t *testing.T) {
	f := newFixture(t, 1, nil)
	a := dial(t, f.t.Addr(0), pdu.Digests{})
	cntlid := a.adminUp(0)
	io := ioUp(t, f.t.Addr(0), pdu.Digests{}, 1, cntlid, 0)
	model := make([]byte, nsSize)
	rng := rand.New(rand.NewSource(7))
	for round := 0; round < 4; round++ {
		outs, ins := map[uint16][]byte{}, map[uint16][]byte{}
		want := map[uint16][]byte{}
		used := map[uint64]bool{}
		for i := 0; i < 64; i++ {
			lba := uint64(rng.Intn(nsSize/nsBS - 8))
			if used[lba/8] {
				continue
			}
			used[lba/8] = true
			lba = lba / 8 * 8
			n := uint32(1 + rng.Intn(8))
			write := rng.Intn(2) == 0
			var s pdu.SQE
			cid := io.nextCID()
			if write {
				s = rwSQE(pdu.IOWrite, 1, lba, n, n <= 4)
				d := testutil.Pattern(int(n)*nsBS, byte(rng.Intn(256)))
				outs[cid] = d
				copy(model[lba*nsBS:], d)
			} else {
				s = rwSQE(pdu.IORead, 1, lba, n, false)
				ins[cid] = make([]byte, n*nsBS)
				want[cid] = append([]byte(nil), model[lba*nsBS:uint64(lba)*nsBS+uint64(n)*nsBS]...)
			}
			s.CID, s.Flags = cid, pdu.PSDTSGL
			io.submit(&s, outs[cid])
		}
		for pending := len(outs) + len(ins); pending > 0; {
			if c, done := io.handle(io.read(), outs, ins); done {
				mustOK(t, "in-flight command", c)
				if w, ok := want[c.CID]; ok && !bytes.Equal(ins[c.CID], w) {
					t.Fatalf("read cid %#x differs", c.CID)
				}
				pending--
			}
		}
	}
	if !bytes.Equal(memRead(t, f, 0, 0, nsSize), model) {
		t.Fatal("device differs from the model")
	}
}

// TestSuccessFlag checks A.1.12: SUCCESS (with LAST_PDU) only on queues
// that disabled SQ flow control, and SQHD 0xFFFF there.
func TestSuccessFlag(t *testing.T) {
	f := newFixture(t, 1, nil)
	a := dial(t, f.t.Addr(0), pdu.Digests{})
	cntlid := a.adminUp(0)
	for _, noFlow := range []bool{false, true} {
		var cattr uint8
		if noFlow {
			cattr = pdu.CAttrDisableSQFlow
		}
		io := ioUp(t, f.t.Addr(0), pdu.Digests{}, uint16(1+cattr), cntlid, cattr)
		s := rwSQE(pdu.IORead, 1, 0, 1, false)
		s.CID, s.Flags = 0x7001, pdu.PSDTSGL
		io.submit(&s, nil)
		p := io.read()
		if p.Header.Type != pdu.TypeC2HData || p.Header.Flags&pdu.FlagLastPDU == 0 {
			t.Fatalf("read answer %+v", p.Header)
		}
		succ := p.Header.Flags&pdu.FlagSuccess != 0
		if succ != noFlow {
			t.Fatalf("noSQFlow=%t but SUCCESS=%t", noFlow, succ)
		}
		if !noFlow {
			c := pdu.ParseCapsuleResp(io.read().Hdr)
			if c.CID != 0x7001 || c.SQHD == 0xFFFF || c.SQID != 1 {
				t.Fatalf("capsule resp %+v", c)
			}
		}
		c := io.do(pdu.SQE{Opcode: pdu.IOFlush, NSID: 1}, nil, nil)
		if noFlow != (c.SQHD == 0xFFFF) {
			t.Fatalf("sqhd %#x with noSQFlow=%t", c.SQHD, noFlow)
		}
	}
}
