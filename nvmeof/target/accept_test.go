package target

import (
	"net"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// emfileListener fails its first N Accept calls with EMFILE.
type emfileListener = testutil.EMFILEListener

// TestAcceptSurvivesEMFILE: a listener out of descriptors keeps accepting
// once they are back, instead of ending its loop while the target runs on.
func TestAcceptSurvivesEMFILE(t *testing.T) {
	var ln *emfileListener
	f := newFixtureWrapped(t, 1, nil, func(inner net.Listener) net.Listener {
		ln = &emfileListener{Listener: inner}
		ln.N.Store(5)
		return ln
	})
	dial(t, f.t.Addr(0), pdu.Digests{}).adminUp(0)
	if c := ln.Calls.Load(); c < 6 {
		t.Fatalf("Accept called %d times, want 5 failures then a success", c)
	}
}

// TestConnectionCap: with MaxConnections 2 a third connection is closed
// unanswered, and a slot freed lets the next one in.
func TestConnectionCap(t *testing.T) {
	f := newFixture(t, 1, func(c *Config) { c.MaxConnections, c.MaxPendingConnections = 2, 2 })
	addr := f.t.Addr(0)
	a := dial(t, addr, pdu.Digests{})
	dial(t, addr, pdu.Digests{}).adminUp(0)
	extra := dialRaw(t, addr)
	extra.send(pdu.ICReq{}.Append(nil))
	if tr := extra.expectClosed(); tr != nil {
		t.Fatalf("refused connection got a TermReq %+v, want a plain close", tr)
	}
	a.nc.Close()
	testutil.WaitFor(t, "a connection accepted after one of two closed", func() bool {
		h := dialRaw(t, addr)
		defer h.nc.Close()
		h.send(pdu.ICReq{}.Append(nil))
		p, err := h.tryRead()
		return err == nil && p.Header.Type == pdu.TypeICResp
	})
}

// TestStalledHandshake: a connection that never sends its ICReq, or sends
// it and never connects, is closed after HandshakeTimeout; one that
// connected is not.
func TestStalledHandshake(t *testing.T) {
	const timeout = 100 * time.Millisecond
	f := newFixture(t, 1, func(c *Config) { c.HandshakeTimeout = timeout })
	addr := f.t.Addr(0)
	connected := dial(t, addr, pdu.Digests{})
	connected.adminUp(0)

	silent := dialRaw(t, addr)
	silent.expectClosed()

	icOnly := dial(t, addr, pdu.Digests{})
	icOnly.expectClosed()

	// A command other than Connect does not count as connecting.
	busy := dial(t, addr, pdu.Digests{})
	expectStatus(t, "property get before connect", busy.propGet(pdu.PropCAP, true), pdu.SCCommandSequenceError, true)
	busy.expectClosed()

	// The connected queue outlived all of that and still answers.
	mustOK(t, "get cap after the others timed out", connected.propGet(pdu.PropCAP, true))
}
