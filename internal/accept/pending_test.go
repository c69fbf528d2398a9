package accept

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// fromConn is one end of a net.Pipe that says it comes from ip.
type fromConn struct {
	net.Conn
	ip string
}

func (c fromConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.ParseIP(c.ip), Port: 1} }

// pipeFrom returns a connection from ip and its peer's end.
func pipeFrom(t *testing.T, ip string) (nc net.Conn, peer net.Conn) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return fromConn{a, ip}, b
}

// closed says whether the peer of a pipe sees its end closed.
func closed(peer net.Conn) bool {
	_, err := peer.Read(make([]byte, 1))
	return errors.Is(err, io.EOF)
}

// TestPending: an address gets at most maxPerIP handshakes; with every
// slot taken a newcomer from a quieter address evicts the busiest
// address's oldest, one from the busiest address is refused; Done frees a
// slot, twice is harmless.
func TestPending(t *testing.T) {
	p := NewPending(4, 3)
	var flood []net.Conn
	var peers []net.Conn
	for i := 0; i < 3; i++ {
		nc, peer := pipeFrom(t, "10.0.0.1")
		if r, ev := p.Add(nc); r != "" || ev {
			t.Fatalf("flood %d: refused %q evicted %t", i, r, ev)
		}
		flood, peers = append(flood, nc), append(peers, peer)
	}
	if nc, _ := pipeFrom(t, "10.0.0.1"); true {
		if r, _ := p.Add(nc); r != RefusedPendingPerIP {
			t.Fatalf("fourth from one address: %q, want %q", r, RefusedPendingPerIP)
		}
	}
	other, _ := pipeFrom(t, "10.0.0.2")
	if r, ev := p.Add(other); r != "" || ev {
		t.Fatalf("other address below the total: refused %q evicted %t", r, ev)
	}
	// Full (4): a third address evicts the busiest's oldest.
	third, _ := pipeFrom(t, "10.0.0.3")
	if r, ev := p.Add(third); r != "" || !ev {
		t.Fatalf("third address with the total full: refused %q evicted %t, want admitted with an eviction", r, ev)
	}
	if !closed(peers[0]) {
		t.Fatal("the busiest address's oldest handshake was not closed")
	}
	// 10.0.0.1 has 2, 10.0.0.2 and .3 one each: another from .2 evicts
	// from .1; then .1 (1), .2 (2), .3 (1): one more from .2 is refused.
	second, _ := pipeFrom(t, "10.0.0.2")
	if r, ev := p.Add(second); r != "" || !ev {
		t.Fatalf("second from .2: refused %q evicted %t", r, ev)
	}
	if nc, _ := pipeFrom(t, "10.0.0.2"); true {
		if r, _ := p.Add(nc); r != RefusedPending {
			t.Fatalf("third from .2, the busiest, with the total full: %q, want %q", r, RefusedPending)
		}
	}
	if !p.Done(third) || p.Done(third) {
		t.Fatal("Done: want true once for a counted handshake, then false")
	}
	if p.Done(flood[0]) {
		t.Fatal("Done of an evicted handshake said it was still counted")
	}
	if late, _ := pipeFrom(t, "10.0.0.4"); true {
		if r, ev := p.Add(late); r != "" || ev {
			t.Fatalf("after Done: refused %q evicted %t, want a free slot", r, ev)
		}
	}
}

// TestPendingEvictsOldestOfTied: with every address holding as many
// handshakes, the one evicted for a newcomer is the oldest of them all,
// whatever order the addresses sit in the map.
func TestPendingEvictsOldestOfTied(t *testing.T) {
	for round := range 20 {
		p := NewPending(4, 0)
		var peers []net.Conn
		for i := range 4 {
			nc, peer := pipeFrom(t, fmt.Sprintf("10.0.%d.%d", round, i+1))
			if r, _ := p.Add(nc); r != "" {
				t.Fatalf("handshake %d refused: %q", i, r)
			}
			peers = append(peers, peer)
		}
		nc, _ := pipeFrom(t, "10.1.0.1")
		if r, ev := p.Add(nc); r != "" || !ev {
			t.Fatalf("newcomer: refused %q evicted %t", r, ev)
		}
		peers[0].SetReadDeadline(time.Now().Add(5 * time.Second)) // a wrong eviction must fail, not hang
		if !closed(peers[0]) {
			t.Fatalf("round %d: the oldest handshake was not the one evicted", round)
		}
	}
}
