package target

import (
	"net"
	"testing"
)

// discardConn is a net.Conn whose writes succeed and go nowhere.
type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }

// TestSenderReusesArenas: a connection that sends one small PDU at a time
// (a completion per command) allocates nothing per PDU once warm; each
// drain used to end by swapping in a fresh 16 KiB arena.
func TestSenderReusesArenas(t *testing.T) {
	s := newSender(discardConn{}, func() error { return nil }, func(err error) { t.Error(err) })
	s.grow()
	resp := make([]byte, 24)
	for range 8 {
		s.sendDirect(resp, nil, nil, nil)
	}
	if n := testing.AllocsPerRun(100, func() { s.sendDirect(resp, nil, nil, nil) }); n != 0 {
		t.Fatalf("%v allocations per PDU sent, want 0", n)
	}
}
