package accept

import (
	"errors"
	"io"
	"net"
	"testing"
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
	p.Done(third)
	p.Done(third)
	p.Done(flood[0]) // evicted already
	if late, _ := pipeFrom(t, "10.0.0.4"); true {
		if r, ev := p.Add(late); r != "" || ev {
			t.Fatalf("after Done: refused %q evicted %t, want a free slot", r, ev)
		}
	}
}
