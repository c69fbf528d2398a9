package target

import (
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// sessionSeed builds a valid host byte stream (after the ICReq) for one
// queue: Connect, then cmds.
func sessionSeed(dg pdu.Digests, qid, cntlid uint16, cmds ...[]byte) []byte {
	cd := pdu.ConnectData{CNTLID: cntlid, SubNQN: testNQN, HostNQN: testHost}
	cd.HostID[0] = 1
	sqe := pdu.ConnectCmd{QID: qid, SQSize: 31, KATO: 60000}.SQE(1)
	b := pdu.AppendCapsuleCmd(nil, &sqe, cd.Marshal(), dg)
	for _, c := range cmds {
		b = append(b, c...)
	}
	return b
}

func capsule(dg pdu.Digests, s pdu.SQE, data []byte) []byte {
	s.Flags = pdu.PSDTSGL
	return pdu.AppendCapsuleCmd(nil, &s, data, dg)
}

// FuzzConnStream feeds one connection of a live target with a valid ICReq
// followed by arbitrary bytes (seeded with whole admin and I/O sessions).
// The target must not panic, must close or finish the connection once the
// host closes its side, and must keep its other queues working.
func FuzzConnStream(f *testing.F) {
	fx := newFixture(f, 1, nil)
	a := dial(f, fx.t.Addr(0), pdu.Digests{})
	cntlid := a.adminUp(0)
	for _, dg := range []pdu.Digests{{}, {Header: true, Data: true}} {
		en := pdu.PropertyCmd{Offset: pdu.PropCC, Value: uint64(pdu.HostCC(0, true))}.SetSQE(2)
		f.Add(dg.Byte(), sessionSeed(dg, 0, pdu.CNTLIDDynamic,
			pdu.AppendCapsuleCmd(nil, &en, nil, dg),
			capsule(dg, pdu.IdentifySQE(3, pdu.CNSController, 0), nil),
			capsule(dg, pdu.IdentifySQE(4, pdu.CNSNSDescList, 1), nil),
			capsule(dg, pdu.GetLogPageCmd{LID: pdu.LogANA, NumD: 1024}.SQE(5, 0xFFFFFFFF), nil),
			capsule(dg, pdu.FeaturesSQE(6, true, pdu.FeatNumQueues, 0x30003), nil),
			capsule(dg, pdu.SQE{Opcode: pdu.AdminAsyncEvent, CID: 31}, nil)))
		w := rwSQE(pdu.IOWrite, 1, 2, 1, true)
		w.CID = 7
		r := rwSQE(pdu.IORead, 2, 0, 2, false)
		r.CID = 8
		big := rwSQE(pdu.IOWrite, 1, 8, 2, false)
		big.CID = 9
		h2c := pdu.AppendData(nil, pdu.TypeH2CData, pdu.FlagLastPDU, pdu.DataHdr{CCCID: 9, DataL: 2 * nsBS}, make([]byte, 2*nsBS), dg)
		ranges := pdu.AppendDSMRanges(nil, []pdu.DSMRange{{NLB: 4, SLBA: 1}})
		f.Add(dg.Byte(), sessionSeed(dg, 1, cntlid,
			capsule(dg, w, make([]byte, nsBS)), capsule(dg, r, nil), capsule(dg, big, nil), h2c,
			capsule(dg, pdu.SQE{Opcode: pdu.IODSM, NSID: 1, CID: 10, CDW11: pdu.DSMDeallocate,
				SGL: pdu.SGL{Length: 16, ID: pdu.SGLInCapsule}}, ranges),
			capsule(dg, pdu.SQE{Opcode: pdu.IOFlush, NSID: 1, CID: 11}, nil)))
		resv := func(cid uint16, op uint8, c pdu.ResvCmd, k1, k2 uint64) []byte {
			return capsule(dg, pdu.SQE{Opcode: op, NSID: 1, CID: cid, CDW10: c.CDW10(),
				SGL: pdu.SGL{Length: 16, ID: pdu.SGLInCapsule}}, pdu.AppendResvKeys(nil, k1, k2))
		}
		f.Add(dg.Byte(), sessionSeed(dg, 1, cntlid,
			resv(12, pdu.IOResvRegister, pdu.ResvCmd{}, 0, 5),
			resv(13, pdu.IOResvAcquire, pdu.ResvCmd{Type: pdu.ResvWriteExclusiveAllRegs}, 5, 0),
			capsule(dg, pdu.SQE{Opcode: pdu.IOResvReport, NSID: 1, CID: 14, CDW10: 31, CDW11: pdu.ResvReportEDS,
				SGL: pdu.SGL{Length: 128, ID: pdu.SGLTransport}}, nil),
			resv(15, pdu.IOResvAcquire, pdu.ResvCmd{Action: pdu.ResvAcquireActionPreemptAbrt, Type: pdu.ResvWriteExclusive}, 5, 5),
			resv(16, pdu.IOResvRelease, pdu.ResvCmd{Action: pdu.ResvReleaseActionClear}, 5, 0)))
	}
	f.Fuzz(func(t *testing.T, dgb byte, in []byte) {
		hostSide, tgtSide := net.Pipe()
		c := fx.t.newConn(fx.t.listeners[0], tgtSide)
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.serve()
		}()
		go io.Copy(io.Discard, hostSide)
		go func() {
			hostSide.Write(pdu.ICReq{Digests: pdu.DigestsFromByte(dgb)}.Append(nil))
			hostSide.Write(in)
			hostSide.Close()
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("connection did not finish after the host closed:\n%s", buf[:runtime.Stack(buf, true)])
		}
	})
	a.nc.SetDeadline(time.Now().Add(30 * time.Second))
	mustOK(f, "admin queue still served", a.do(pdu.FeaturesSQE(0, false, pdu.FeatNumQueues, 0), nil, nil))
}
