package testutil

import (
	"net"
	"testing"
)

// TestDialFrom: the server sees the connection come from the asked
// address.
func TestDialFrom(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	nc := DialFrom(t, "127.0.0.2", l.Addr().String())
	sc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if got := sc.RemoteAddr().(*net.TCPAddr).IP.String(); got != "127.0.0.2" {
		t.Fatalf("server saw %s, want 127.0.0.2", got)
	}
	if got := nc.LocalAddr().(*net.TCPAddr).IP.String(); got != "127.0.0.2" {
		t.Fatalf("local address %s, want 127.0.0.2", got)
	}
}
