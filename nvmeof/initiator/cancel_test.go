package initiator

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
)

// TestOpenHonoursCancel: a target that accepts the connection and never
// answers ICReq holds Open until the caller cancels, not until
// ConnectTimeout; the error says why and is class unavailable.
func TestOpenHonoursCancel(t *testing.T) {
	// The target reads what it is sent and never answers.
	silent := testutil.Serve(t, func(c net.Conn) {
		io.Copy(io.Discard, c)
		c.Close()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Open(ctx, Options{SubsysNQN: "nqn.test:silent", NSID: 1, Paths: []string{silent}, ConnectTimeout: time.Hour})
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
