package testutil

import (
	"errors"
	"io"
	"net"
	"testing"
)

// TestTCPPair: bytes go both ways between the two ends, and both are
// closed once the test that made them has ended.
func TestTCPPair(t *testing.T) {
	var client, server net.Conn
	t.Run("pair", func(t *testing.T) {
		client, server = TCPPair(t)
		for _, dir := range [][2]net.Conn{{client, server}, {server, client}} {
			if _, err := dir[0].Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 4)
			if _, err := io.ReadFull(dir[1], got); err != nil || string(got) != "ping" {
				t.Fatalf("read %q, %v", got, err)
			}
		}
	})
	for _, c := range []net.Conn{client, server} {
		if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Errorf("write after the test: %v, want net.ErrClosed", err)
		}
	}
}
