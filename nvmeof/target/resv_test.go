package target

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// upAs brings up a controller whose Connect carries host ID {id, 0...}
// and returns its admin queue and one I/O queue.
func upAs(t *testing.T, addr string, id byte) (admin, io *host) {
	t.Helper()
	connect := func(h *host, qid, cntlid uint16) uint16 {
		cd := pdu.ConnectData{CNTLID: cntlid, SubNQN: testNQN, HostNQN: testHost}
		cd.HostID[0] = id
		c := h.do(pdu.ConnectCmd{QID: qid, SQSize: 31}.SQE(0), cd.Marshal(), nil)
		mustOK(t, "connect", c)
		h.qid = qid
		return uint16(c.DW0)
	}
	admin = dial(t, addr, pdu.Digests{})
	cntlid := connect(admin, 0, pdu.CNTLIDDynamic)
	admin.enable(true)
	io = dial(t, addr, pdu.Digests{})
	connect(io, 1, cntlid)
	return admin, io
}

func resvSQE(op uint8, c pdu.ResvCmd, n int) pdu.SQE {
	return pdu.SQE{Opcode: op, NSID: 1, CDW10: c.CDW10(), SGL: pdu.SGL{ID: pdu.SGLInCapsule, Length: uint32(n)}}
}

func register(h *host, key uint64) pdu.CQE {
	return h.do(resvSQE(pdu.IOResvRegister, pdu.ResvCmd{}, 16), pdu.AppendResvKeys(nil, 0, key), nil)
}

func acquire(h *host, act uint8, rt pdu.ResvType, crkey, prkey uint64) pdu.CQE {
	return h.do(resvSQE(pdu.IOResvAcquire, pdu.ResvCmd{Action: act, Type: rt}, 16), pdu.AppendResvKeys(nil, crkey, prkey), nil)
}

// TestReservationIdentify: ONCS bit 5 and RESCAP (PTPL only with a
// ReservationFile).
func TestReservationIdentify(t *testing.T) {
	f := newFixture(t, 1, func(c *Config) {
		c.Subsystems[0].Namespaces[1].ReservationFile = filepath.Join(t.TempDir(), "ns2.resv")
	})
	admin, _ := upAs(t, f.t.Addr(0), 1)
	b, c := admin.identify(pdu.CNSController, 0)
	mustOK(t, "identify controller", c)
	if id, err := pdu.ParseIdentifyController(b); err != nil || id.ONCS&pdu.ONCSReservations == 0 {
		t.Fatalf("ONCS %#x (%v): reservations bit 5 missing", id.ONCS, err)
	}
	for nsid, want := range map[uint32]uint8{1: 0xFE, 2: 0xFF} {
		b, c := admin.identify(pdu.CNSNamespace, nsid)
		mustOK(t, "identify namespace", c)
		if b[31] != want {
			t.Errorf("nsid %d RESCAP %#x, want %#x", nsid, b[31], want)
		}
	}
}

// TestReservationCommandErrors: the malformed cases get the statuses
// nvmet gives.
func TestReservationCommandErrors(t *testing.T) {
	f := newFixture(t, 1, nil)
	_, io := upAs(t, f.t.Addr(0), 1)
	rep := func(numd, cdw11 uint32) pdu.CQE {
		s := pdu.SQE{Opcode: pdu.IOResvReport, NSID: 1, CDW10: numd, CDW11: cdw11, SGL: pdu.SGL{ID: pdu.SGLTransport, Length: 4096}}
		return io.do(s, nil, make([]byte, 4096))
	}
	expectStatus(t, "report without EDS", rep(1023, 0), pdu.SCHostIDInconsistent, true)
	expectStatus(t, "report shorter than the header", rep(14, 1), pdu.SCInvalidField, true)
	expectStatus(t, "report longer than the buffer", rep(1024, 1), pdu.SCInvalidField, true)
	mustOK(t, "report", rep(15, 1))
	expectStatus(t, "register with 8 bytes", io.do(resvSQE(pdu.IOResvRegister, pdu.ResvCmd{}, 8), make([]byte, 8), nil),
		pdu.SCDataSGLLengthInvalid, true)
	expectStatus(t, "register action 3", io.do(resvSQE(pdu.IOResvRegister, pdu.ResvCmd{Action: 3}, 16), make([]byte, 16), nil),
		pdu.SCInvalidField, true)
	mustOK(t, "register", register(io, 7))
	expectStatus(t, "acquire with IEKEY", io.do(resvSQE(pdu.IOResvAcquire, pdu.ResvCmd{IEKey: true, Type: 1}, 16),
		pdu.AppendResvKeys(nil, 7, 0), nil), pdu.SCInvalidField, true)
	mustOK(t, "acquire", acquire(io, 0, pdu.ResvWriteExclusive, 7, 0))
	mustOK(t, "release with 8 bytes", io.do(resvSQE(pdu.IOResvRelease, pdu.ResvCmd{Type: 1}, 8), pdu.AppendResvKeys(nil, 7, 0)[:8], nil))
}

// TestBroadcastFlushUnderReservation: a flush of every namespace is
// refused when one of them is reserved against the host.
func TestBroadcastFlushUnderReservation(t *testing.T) {
	f := newFixture(t, 1, nil)
	_, a := upAs(t, f.t.Addr(0), 1)
	_, b := upAs(t, f.t.Addr(0), 2)
	mustOK(t, "register", register(a, 7))
	mustOK(t, "acquire", acquire(a, 0, pdu.ResvWriteExclusive, 7, 0))
	all := pdu.SQE{Opcode: pdu.IOFlush, NSID: 0xFFFFFFFF}
	mustOK(t, "holder's flush of all", a.do(all, nil, nil))
	expectStatus(t, "other host's flush of all", b.do(all, nil, nil), pdu.SCReservationConflict, true)
	mustOK(t, "other host's flush of nsid 2", b.do(pdu.SQE{Opcode: pdu.IOFlush, NSID: 2}, nil, nil))
}

// TestPreemptDoesNotWaitForUntransferredData: a write whose data has not
// arrived has not passed the reservation check, so a preempt-and-abort
// must not wait for it (the stale host may never send it); when the data
// does arrive the write is refused and the device is untouched.
func TestPreemptDoesNotWaitForUntransferredData(t *testing.T) {
	f := newFixture(t, 1, nil)
	_, a := upAs(t, f.t.Addr(0), 1)
	_, b := upAs(t, f.t.Addr(0), 2)
	mustOK(t, "register a", register(a, 0xA))
	mustOK(t, "register b", register(b, 0xB))
	mustOK(t, "acquire", acquire(a, 0, pdu.ResvWriteExclusiveAllRegs, 0xA, 0))
	w := rwSQE(pdu.IOWrite, 1, 0, 4, false)
	w.CID, w.Flags = 0x77, pdu.PSDTSGL
	a.submit(&w, nil)
	p := a.read()
	if p.Header.Type != pdu.TypeR2T {
		t.Fatalf("got %v, want an R2T", p.Header.Type)
	}
	mustOK(t, "preempt-and-abort", acquire(b, 2, pdu.ResvWriteExclusiveAllRegs, 0xB, 0xA))
	data := bytes.Repeat([]byte{0xAA}, 4*nsBS)
	a.sendH2C(pdu.ParseR2T(p.Hdr), data)
	for {
		c, done := a.handle(a.read(), map[uint16][]byte{0x77: data}, nil)
		if done {
			expectStatus(t, "stale write after the preempt", c, pdu.SCReservationConflict, true)
			break
		}
	}
	if got := memRead(t, f, 0, 0, 4*nsBS); !bytes.Equal(got, make([]byte, 4*nsBS)) {
		t.Fatal("the refused write reached the device")
	}
}

// TestReservationFileErrors: a damaged or inconsistent file stops New
// with an error naming it.
func TestReservationFileErrors(t *testing.T) {
	for name, body := range map[string]string{
		"not json":          "{",
		"bad host id":       `{"gen":1,"type":0,"registrants":[{"host_id":"zz","key":1}]}`,
		"holder unknown":    `{"gen":1,"type":1,"holder":"01000000000000000000000000000000","registrants":[]}`,
		"type out of range": `{"gen":1,"type":9,"registrants":[{"host_id":"01000000000000000000000000000000","key":1}]}`,
		"twice":             `{"gen":1,"type":0,"registrants":[{"host_id":"01000000000000000000000000000000","key":1},{"host_id":"01000000000000000000000000000000","key":2}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "ns.resv")
			if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			mem, err := blockdev.NewMem(nsSize, nsBS)
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Listeners: []ListenerConfig{{Address: "127.0.0.1:0"}}, Subsystems: []SubsystemConfig{{NQN: testNQN,
				AllowAnyHost: true, Namespaces: []NamespaceConfig{{NSID: 1, Device: mem, ReservationFile: file}}}}}
			if _, err := New(cfg); err == nil || !bytes.Contains([]byte(err.Error()), []byte(file)) {
				t.Fatalf("New with %s: %v, want an error naming the file", name, err)
			}
		})
	}
}

// BenchmarkReservationCheck measures what every I/O command now pays:
// the gate in read mode plus the reservation check, with no reservation
// and with a write-exclusive all-registrants reservation and 2 or 16
// registrants.
//
//	go test -run XXX -bench ReservationCheck ./nvmeof/target/
func BenchmarkReservationCheck(b *testing.B) {
	for _, c := range []struct {
		name string
		regs int
	}{{"none", 0}, {"wear-2", 2}, {"wear-16", 16}} {
		b.Run(c.name, func(b *testing.B) {
			var r reservations
			st := &resvState{}
			for i := range c.regs {
				st.Regs = append(st.Regs, registration{Host: hostID{0: byte(i + 1)}, Key: uint64(i + 1)})
			}
			if c.regs > 0 {
				st.Type = pdu.ResvWriteExclusiveAllRegs
			}
			r.state.Store(st.seal())
			var g sync.RWMutex
			me := hostID{0: byte(c.regs)}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					g.RLock()
					ok := r.state.Load().allows(me, pdu.IOWrite)
					g.RUnlock()
					if !ok {
						b.Fatal("refused")
					}
				}
			})
		})
	}
}
