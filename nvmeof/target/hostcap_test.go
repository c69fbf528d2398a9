package target

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// TestConnectionsPerHost: with MaxConnectionsPerHost 2 a host's third
// queue is refused with Controller Busy (logged once, with the peer's
// address and the NQN), another host still connects, and a queue that
// ends lets the next one in.
func TestConnectionsPerHost(t *testing.T) {
	var logs testutil.Buffer
	f := newFixture(t, 1, func(c *Config) {
		c.MaxConnectionsPerHost = 2
		c.Subsystems[1].AllowedHosts = append(c.Subsystems[1].AllowedHosts, testHost)
		c.Logf = logs.Logf
	})
	addr := f.t.Addr(0)
	adm := dial(t, addr, pdu.Digests{})
	cntlid := adm.adminUp(0)
	q1 := dial(t, addr, pdu.Digests{})
	mustOK(t, "io queue 1", q1.connect(1, 31, cntlid, testNQN, testHost, 0, 0))
	var firstPeer string
	for range 2 {
		q2 := dial(t, addr, pdu.Digests{})
		if firstPeer == "" {
			firstPeer = q2.nc.LocalAddr().String()
		}
		expectStatus(t, "third queue of the host", q2.connect(2, 31, cntlid, testNQN, testHost, 0, 0), pdu.SCConnectControllerBusy, false)
		expectStatus(t, "third queue, other subsystem", q2.connect(0, 31, pdu.CNTLIDDynamic, testNQN+"-other", testHost, 0, 0),
			pdu.SCConnectControllerBusy, false)
	}
	refusal := fmt.Sprintf("%s: Connect of host %q refused", firstPeer, testHost)
	if n := strings.Count(logs.String(), fmt.Sprintf("Connect of host %q refused: it has 2 queues open", testHost)); n != 1 {
		t.Fatalf("%d refusals logged, want 1:\n%s", n, logs.String())
	}
	if strings.Count(logs.String(), refusal) != 1 {
		t.Fatalf("refusal logged without the peer address %s:\n%s", refusal, logs.String())
	}
	other := dial(t, addr, pdu.Digests{})
	mustOK(t, "another host", other.connect(0, 31, pdu.CNTLIDDynamic, testNQN+"-other", "nqn.someone-else", 0, 0))

	q1.nc.Close()
	testutil.WaitFor(t, "a queue admitted after one ended", func() bool {
		q := dial(t, addr, pdu.Digests{})
		return q.connect(2, 31, cntlid, testNQN, testHost, 0, 0).Status.Success()
	})
}

// TestRefusedHostLogged: a Connect of a host not allowed is logged with
// the peer's address and the NQN, once however often it is retried.
func TestRefusedHostLogged(t *testing.T) {
	var logs testutil.Buffer
	f := newFixture(t, 1, func(c *Config) { c.Logf = logs.Logf })
	for range 3 {
		h := dial(t, f.t.Addr(0), pdu.Digests{})
		expectStatus(t, "stranger", h.connect(0, 31, pdu.CNTLIDDynamic, testNQN, "nqn.stranger", 0, 0), pdu.SCConnectInvalidHost, true)
	}
	if n := strings.Count(logs.String(), `127.0.0.1:`); n < 1 || strings.Count(logs.String(), `Connect of host "nqn.stranger" to `+testNQN+" refused: host not allowed") != 1 {
		t.Fatalf("want one refusal with the peer address and the NQN:\n%s", logs.String())
	}
}
