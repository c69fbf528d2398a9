package accept

import (
	"io"
	"net"
	"testing"
	"time"
)

// pair returns the server end of a TCP connection dialled from the local
// address from (the whole of 127/8 is this host) and the client end.
func pair(t *testing.T, l net.Listener, from string) (server, client net.Conn) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	client, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return server, client
}

// TestPendingBudget: a third handshake from one address is refused while
// another address is admitted; at the total the oldest handshake is
// evicted (its socket closed, its Done says so) and a finished handshake
// gives its place back.
func TestPendingBudget(t *testing.T) {
	l := listen(t)
	p := NewPending(2, 3)
	a1, a1c := pair(t, l, "127.0.0.2")
	a2, _ := pair(t, l, "127.0.0.2")
	a3, _ := pair(t, l, "127.0.0.2")
	h1, r := p.Begin(a1)
	if h1 == nil || r != "" {
		t.Fatalf("first handshake refused: %q", r)
	}
	h2, _ := p.Begin(a2)
	if h, r := p.Begin(a3); h != nil || r != RefusedHandshakesPerIP {
		t.Fatalf("third handshake from 127.0.0.2: %v %q, want refused for %s", h, r, RefusedHandshakesPerIP)
	}
	b1, _ := pair(t, l, "127.0.0.3")
	hb1, r := p.Begin(b1)
	if hb1 == nil || p.Len() != 3 {
		t.Fatalf("127.0.0.3 refused (%q) or %d pending, want 3", r, p.Len())
	}
	b2, _ := pair(t, l, "127.0.0.3")
	hb2, _ := p.Begin(b2) // the total is full: h1 goes
	if hb2 == nil || p.Len() != 3 {
		t.Fatalf("at the total: %v, %d pending, want admitted and 3", hb2, p.Len())
	}
	if !h1.Done() || h2.Done() {
		t.Fatal("the oldest handshake was not the one evicted")
	}
	a1c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := a1c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("evicted connection's client read %v, want EOF", err)
	}
	hb1.Done()
	if p.Len() != 1 { // hb2
		t.Fatalf("%d pending after h2's and hb1's Done, want 1", p.Len())
	}
	if h, _ := p.Begin(a3); h == nil {
		t.Fatal("127.0.0.2 still refused after its handshakes ended")
	}
}
