package target

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// heapInUse is the Go heap and stacks in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// vmRSS is the process's resident set (Linux), 0 where unknown.
func vmRSS() uint64 {
	n, _ := testutil.RSS(os.Getpid())
	return uint64(n)
}

// TestIdleConnRSS reports what NVSTRIPE_IDLE_CONNS idle connections that
// sent only an ICReq cost the target (a measurement, not a check: run with
// NVSTRIPE_IDLE_CONNS=1000 -v).
func TestIdleConnRSS(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("NVSTRIPE_IDLE_CONNS"))
	if n == 0 {
		t.Skip("measurement: set NVSTRIPE_IDLE_CONNS=1000 to run")
	}
	f := newFixture(t, 1, nil)
	heap0, rss0 := heapInUse(), vmRSS()
	for i := 0; i < n; i++ {
		dial(t, f.t.Addr(0), pdu.Digests{})
	}
	time.Sleep(500 * time.Millisecond)
	heap1, rss1 := heapInUse(), vmRSS()
	t.Logf("%d idle ICReq-only connections: heap+stacks +%.1f MiB, VmRSS +%.1f MiB (whole process, clients included)",
		n, float64(heap1-heap0)/(1<<20), float64(int64(rss1)-int64(rss0))/(1<<20))
}

// connectSQE is a Connect for the admin queue whose data the target must
// fetch with an R2T (transport SGL of n bytes).
func connectSQE(cid uint16, n uint32) pdu.SQE {
	s := pdu.ConnectCmd{QID: 0, SQSize: 31}.SQE(0)
	s.CID, s.Flags = cid, pdu.PSDTSGL
	s.SGL = pdu.SGL{ID: pdu.SGLTransport, Length: n}
	return s
}

// dialLean is dial with a 4 KiB read buffer, so that the clients add
// little to the memory a test measures.
func dialLean(t *testing.T, addr string) *host {
	t.Helper()
	h := dialRaw(t, addr)
	h.br = bufio.NewReaderSize(h.nc, 4096)
	h.send(pdu.ICReq{}.Append(nil))
	if p := h.read(); p.Header.Type != pdu.TypeICResp {
		t.Fatalf("icresp: %+v", p.Header)
	}
	return h
}

// TestStrangerMemory: 50 connections that sent an ICReq and Connects
// asking for large transfers, then stall in the middle of a Connect's
// transfer, get no big buffers (before this bound: 1 MiB per Connect, up
// to 256 per connection): heap and resident set grow by less than
// 16 MiB, and every one is dropped at the handshake deadline.
func TestStrangerMemory(t *testing.T) {
	f := newFixture(t, 1, func(c *Config) { c.HandshakeTimeout = 5 * time.Second })
	heap0, rss0 := heapInUse(), vmRSS()
	var hosts []*host
	for i := 0; i < 50; i++ {
		h := dialLean(t, f.t.Addr(0))
		for cid := uint16(1); cid <= 8; cid++ {
			s := connectSQE(cid, 1<<20)
			h.submit(&s, nil)
		}
		stall := connectSQE(9, pdu.ConnectDataLen) // asks for its data, which never comes
		h.submit(&stall, nil)
		hosts = append(hosts, h)
	}
	for i, h := range hosts {
		for cid := 1; cid <= 8; cid++ {
			p := h.read()
			if p.Header.Type != pdu.TypeCapsuleResp {
				t.Fatalf("conn %d: got %v, want a refusal", i, p.Header.Type)
			}
			expectStatus(t, "1 MiB connect", pdu.ParseCapsuleResp(p.Hdr), pdu.SCDataSGLLengthInvalid, true)
		}
		if p := h.read(); p.Header.Type != pdu.TypeR2T {
			t.Fatalf("conn %d: got %v for a Connect of %d bytes, want an R2T", i, p.Header.Type, pdu.ConnectDataLen)
		}
	}
	heap1, rss1 := heapInUse(), vmRSS()
	t.Logf("50 stalled strangers: heap+stacks %+.1f MiB, VmRSS %+.1f MiB", float64(int64(heap1)-int64(heap0))/(1<<20),
		float64(int64(rss1)-int64(rss0))/(1<<20))
	if grew := int64(heap1) - int64(heap0); grew > 16<<20 {
		t.Fatalf("50 stalled strangers grew the heap by %d MiB, want < 16", grew>>20)
	}
	if grew := int64(rss1) - int64(rss0); rss0 != 0 && grew > 16<<20 {
		t.Fatalf("50 stalled strangers grew the resident set by %d MiB, want < 16", grew>>20)
	}
	for _, h := range hosts {
		h.expectClosed() // at HandshakeTimeout
	}
}

// TestStrangerCommands: before Connect only Connect is taken, one
// transfer at a time, with at most Connect's data.
func TestStrangerCommands(t *testing.T) {
	f := newFixture(t, 1, nil)
	h := dial(t, f.t.Addr(0), pdu.Digests{})
	s := pdu.SQE{Opcode: pdu.AdminIdentify, CID: 1, Flags: pdu.PSDTSGL}
	s.SGL = pdu.SGL{ID: pdu.SGLInCapsule, Length: 512}
	h.submit(&s, make([]byte, 512))
	expectStatus(t, "identify before connect", pdu.ParseCapsuleResp(h.read().Hdr), pdu.SCCommandSequenceError, true)

	first, second := connectSQE(2, pdu.ConnectDataLen), connectSQE(3, pdu.ConnectDataLen)
	h.submit(&first, nil)
	if p := h.read(); p.Header.Type != pdu.TypeR2T {
		t.Fatalf("first connect: %v, want R2T", p.Header.Type)
	}
	h.submit(&second, nil)
	expectStatus(t, "second connect transfer", pdu.ParseCapsuleResp(h.read().Hdr), pdu.SCTransientTransport, false)

	big := make([]byte, 4096)
	s = pdu.ConnectCmd{QID: 0, SQSize: 31}.SQE(0)
	s.CID, s.Flags, s.SGL = 4, pdu.PSDTSGL, pdu.SGL{ID: pdu.SGLInCapsule, Length: 4096}
	h.submit(&s, big)
	if tr := h.expectClosed(); tr == nil {
		t.Fatal("4 KiB of in-capsule data before Connect: closed without a C2HTermReq")
	}
}

// TestConnectDeadline: a connection that sends only an ICReq is dropped
// at HandshakeTimeout; one that connected in time is not.
func TestConnectDeadline(t *testing.T) {
	f := newFixture(t, 1, func(c *Config) { c.HandshakeTimeout = 300 * time.Millisecond })
	idle := dial(t, f.t.Addr(0), pdu.Digests{})
	a := dial(t, f.t.Addr(0), pdu.Digests{})
	a.adminUp(0)
	if _, err := idle.tryRead(); err == nil {
		t.Fatal("an ICReq-only connection got a PDU, want it dropped")
	}
	time.Sleep(2 * f.t.cfg.HandshakeTimeout)
	if _, c := a.identify(pdu.CNSController, 0); !c.Status.Success() {
		t.Fatalf("connected queue after the deadline: %v", c.Status)
	}
}
