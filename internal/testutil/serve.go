package testutil

import (
	"context"
	"net"
	"testing"
)

// ServeListener runs serve (a server's Serve method) on a listener on
// 127.0.0.1 (an ephemeral port) and returns its address. When the test
// ends, serve's context is cancelled, the listener closed, and the cleanup
// waits for serve to return; an error it returns is logged.
func ServeListener(t testing.TB, serve func(context.Context, net.Listener) error) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		l.Close()
		if err := <-served; err != nil {
			t.Logf("serving %v: %v", l.Addr(), err)
		}
	})
	return l.Addr().String()
}
