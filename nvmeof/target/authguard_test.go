package target

import (
	"bytes"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// dialFrom is dial from the loopback address src (127.0.0.2 and up are
// usable on Linux loopback without setup).
func dialFrom(tb testing.TB, addr, src string) *host {
	tb.Helper()
	return initConn(newHost(tb, testutil.DialFrom(tb, src, addr)), pdu.Digests{})
}

// TestKeyedStrangerQueues: a keyless stranger claiming the NQN of a host
// with keys opens more queues than the host's cap, with keep-alive 0, and
// never authenticates. Its queues do not count against the host's cap:
// the real host still connects, authenticates and reads; and each of the
// stranger's queues is closed at AuthTimeout (counted as auth_timeout).
// Before, the stranger held the host's every slot for ever and the host's
// Connect got Controller Busy.
func TestKeyedStrangerQueues(t *testing.T) {
	const perHost = 4
	f, s := authFixture(t, func(c *Config) {
		c.MaxConnectionsPerHost = perHost
		c.AuthTimeout = 2 * time.Second
	})
	addr := f.t.Addr(0)
	var stranger []*host
	for i := 0; i < 2*perHost; i++ {
		h := dialFrom(t, addr, "127.0.0.2")
		if c := h.connect(0, 31, pdu.CNTLIDDynamic, testNQN, testHost, 0, 0); c.Status.Success() {
			if c.DW0&pdu.ConnectAuthReq == 0 {
				t.Fatalf("stranger's connect dw0 %#x lacks ATR", c.DW0)
			}
			stranger = append(stranger, h)
		}
	}

	want := bytes.Repeat([]byte("keyed host data!"), nsBS/16)
	if err := f.devs[0].WriteAt(t.Context(), want, 0); err != nil {
		t.Fatal(err)
	}
	a := dial(t, addr, pdu.Digests{})
	c := a.connect(0, 31, pdu.CNTLIDDynamic, testNQN, testHost, 0, 0)
	mustOK(t, "real host's admin connect beside the stranger's queues", c)
	if !a.authenticate(s) {
		t.Fatal("real host's admin queue: right secret refused")
	}
	a.enable(true)
	io := dial(t, addr, pdu.Digests{})
	mustOK(t, "real host's io connect", io.connect(1, 127, uint16(c.DW0), testNQN, testHost, 0, 0))
	if !io.authenticate(s) {
		t.Fatal("real host's io queue: right secret refused")
	}
	got := make([]byte, nsBS)
	mustOK(t, "real host's read", io.do(rwSQE(pdu.IORead, 1, 0, 1, false), nil, got))
	if !bytes.Equal(got, want) {
		t.Fatal("real host read the wrong data")
	}

	for i, h := range stranger {
		if tr := h.expectClosed(); tr != nil {
			t.Fatalf("stranger's queue %d: TermReq %+v, want a plain close at AuthTimeout", i, tr)
		}
	}
	if n := f.t.Stats().Refused[RefusedAuthTimeout]; n != uint64(len(stranger)) {
		t.Fatalf("auth_timeout refusals %d, want %d", n, len(stranger))
	}
	mustOK(t, "real host's read after the stranger's queues closed", io.do(rwSQE(pdu.IORead, 1, 0, 1, false), nil, got))
}
