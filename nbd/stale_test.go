package nbd

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// writeGateDev holds writes at one offset until released, after saying
// that one has arrived; other calls go straight to the Mem. Like a lock
// taken without the context, the gate does not watch ctx.
type writeGateDev struct {
	*blockdev.Mem
	at      int64
	arrived chan struct{} // one value per gated write
	release chan struct{}
}

func (g *writeGateDev) Synchronous() bool { return false }

func (g *writeGateDev) WriteAt(ctx context.Context, p []byte, off int64) error {
	if off == g.at {
		g.arrived <- struct{}{}
		<-g.release
	}
	return g.Mem.WriteAt(ctx, p, off)
}

// A request of a connection that died before its IO started never runs.
// The kernel's nbd driver, on a request timeout, shuts the socket down and
// sends the request again on another connection; the client then writes
// newer data there. The stale copy, queued on the dead connection, must not
// overwrite it.
// Closing the socket, the client can no longer read the answers; shutting
// down its sending side only (no DISC), it reads that the stale request
// was refused.
func TestDeadConnRequestsDropped(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network+"/close", func(t *testing.T) { testDeadConnRequestsDropped(t, network, false) })
		t.Run(network+"/shutdown-write", func(t *testing.T) { testDeadConnRequestsDropped(t, network, true) })
	}
}

func testDeadConnRequestsDropped(t *testing.T, network string, halfClose bool) {
	const x, y = 0, 4096
	g := &writeGateDev{Mem: newMem(t, 1<<20, 512), at: y, arrived: make(chan struct{}, 1), release: make(chan struct{})}
	s, addr := serve(t, Options{Exports: map[string]Export{"g": {Device: g}}, MaxInFlight: 1}, network)
	a, b := testutil.Pattern(4096, 1), testutil.Pattern(4096, 2)

	c1 := dialRaw(t, network, addr, fixedNoZeroes)
	c1.goExport("g", false)
	c2 := dialRaw(t, network, addr, fixedNoZeroes)
	c2.goExport("g", false)
	c1.send(proto.Request{Type: proto.CmdWrite, Cookie: 1, Offset: y, Length: 4096}, testutil.Pattern(4096, 3))
	<-g.arrived // W0 holds conn 1's only in-flight slot
	c1.send(proto.Request{Type: proto.CmdWrite, Cookie: 2, Offset: x, Length: 4096}, a)
	if halfClose {
		mustf(t, c1.c.(interface{ CloseWrite() error }).CloseWrite(), "shut down conn 1's sending side")
	} else {
		c1.c.Close() // the kernel's timeout: W1 is queued on a dead connection
	}

	c2.send(proto.Request{Type: proto.CmdWrite, Cookie: 3, Offset: x, Length: 4096}, a) // W1 again
	if errno, _, _ := c2.simple(0); errno != 0 {
		t.Fatalf("resent W1: %v", errno)
	}
	c2.send(proto.Request{Type: proto.CmdWrite, Cookie: 4, Offset: x, Length: 4096}, b) // W2
	if errno, _, _ := c2.simple(0); errno != 0 {
		t.Fatalf("W2: %v", errno)
	}
	close(g.release)
	if halfClose {
		for _, want := range []proto.Errno{0, proto.ESHUTDOWN} {
			if errno, cookie, _ := c1.simple(0); errno != want {
				t.Fatalf("conn 1: reply %d: %v, want %v", cookie, errno, want)
			}
		}
	}
	waitConns(t, s, 1) // conn 1 has ended: whatever it was going to run, it ran

	c2.send(proto.Request{Type: proto.CmdRead, Cookie: 5, Offset: x, Length: 4096}, nil)
	errno, _, got := c2.simple(4096)
	if errno != 0 {
		t.Fatalf("read: %v", errno)
	}
	if !bytes.Equal(got, b) {
		t.Fatalf("block %d holds %s's data after W2 was acknowledged: the stale W1 of the dead connection ran", x, map[bool]string{true: "W1", false: "unknown"}[bytes.Equal(got, a)])
	}
}

// waitConns waits until s serves n connections.
func waitConns(t *testing.T, s *Server, n int) {
	t.Helper()
	testutil.WaitFor(t, fmt.Sprintf("%d connections", n), func() bool { return s.Stats().Connections == n })
}
