package testutil

import (
	"net"
	"testing"
)

// DialFrom connects to the TCP address addr from the local IP from (the
// whole of 127/8 is this host, so 127.0.0.2 is another client address).
// The connection is closed when t ends; a dial error fails t.
func DialFrom(t testing.TB, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}
