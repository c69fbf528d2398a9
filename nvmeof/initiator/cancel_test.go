package initiator

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
)

// TestOpenHonoursCancel: a target that accepts the connection and never
// answers ICReq holds Open until the caller cancels, not until
// ConnectTimeout; the error says why and is class unavailable.
func TestOpenHonoursCancel(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Open(ctx, Options{SubsysNQN: "nqn.test:silent", NSID: 1, Paths: []string{l.Addr().String()}, ConnectTimeout: time.Hour})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // let it reach the handshake; the test holds either way
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, blockdev.ErrUnavailable) {
			t.Errorf("Open cancelled in the handshake: %v, want context.Canceled, class unavailable", err)
		}
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("Open ignores its context during the handshake")
	}
}
