package testutil

import (
	"context"
	"net"
	"testing"
)

// TestServeListener: serve gets the listener and a live context; once the
// test that served ends, the context is cancelled and serve has returned.
func TestServeListener(t *testing.T) {
	var ended context.Context
	returned := make(chan struct{})
	t.Run("serving", func(t *testing.T) {
		addr := ServeListener(t, func(ctx context.Context, l net.Listener) error {
			defer close(returned)
			ended = ctx
			for {
				c, err := l.Accept()
				if err != nil {
					return ctx.Err()
				}
				c.Write([]byte("hi"))
				c.Close()
			}
		})
		checkGreeting(t, addr)
	})
	select {
	case <-returned:
	default:
		t.Fatal("serve still running after the test's cleanup")
	}
	if ended.Err() == nil {
		t.Fatal("serve's context still live after the test's cleanup")
	}
}
