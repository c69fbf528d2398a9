package target

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// TestHandshakeFlood: 150 connections from five addresses
// (127.0.0.2-6) that stall before Connect, some before their ICReq, on a
// listener capped at 64 connections. Each address holds at most
// MaxPendingPerIP of them and all together at most MaxPendingConnections
// (32), so a host from another address connects at once, long before the
// handshake deadline (one minute here), and reads. Before, the flood held
// all 64 connections and the host's connection was closed unanswered until
// the deadline dropped the flood.
func TestHandshakeFlood(t *testing.T) {
	const flood = 150
	var logs testutil.Buffer
	f := newFixture(t, 1, func(c *Config) {
		c.MaxConnections, c.MaxPendingPerIP = 64, 8
		c.HandshakeTimeout = time.Minute
		c.Logf = logs.Logf
	})
	addr := f.t.Addr(0)
	for i := 0; i < flood; i++ {
		src := fmt.Sprintf("127.0.0.%d", 2+i/(flood/5))
		nc := testutil.DialFrom(t, src, addr)
		if i%2 == 0 {
			nc.Write(pdu.ICReq{}.Append(nil)) // may fail: the target may have closed it
		}
	}
	testutil.WaitFor(t, "every flood connection held or refused", func() bool {
		st := f.t.Stats()
		n := st.Connections
		for _, c := range st.Refused {
			n += int(c)
		}
		return n == flood
	})

	a := dial(t, addr, pdu.Digests{})
	cntlid := a.adminUp(0)
	io := ioUp(t, addr, pdu.Digests{}, 1, cntlid, 0)
	mustOK(t, "read beside the flood", io.do(rwSQE(pdu.IORead, 1, 0, 1, false), nil, make([]byte, nsBS)))

	st := f.t.Stats()
	if held := st.Connections - 2; held > 32 {
		t.Errorf("%d flood connections held, want at most MaxPendingConnections (32)", held)
	}
	// Which budget refuses which flood connection depends on how fast the
	// handlers run (some meet the connection cap while refused ones are
	// still closing; accept's TestPending checks each rule); the
	// handshake budget must have refused some.
	if st.Refused[RefusedPendingPerIP]+st.Refused[RefusedPending]+st.Refused[RefusedPendingEvicted] == 0 {
		t.Errorf("refusals %v: want some max_pending_per_ip, max_pending or pending_evicted", st.Refused)
	}
	if n := strings.Count(logs.String(), "refusing connection from 127.0.0.2:"); n != 1 {
		t.Errorf("%d refusals of 127.0.0.2 logged, want 1:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "use of closed network connection"); n != 0 {
		t.Errorf("%d evicted connections logged, want none:\n%s", n, logs.String())
	}
}
