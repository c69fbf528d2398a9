package agent

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
)

// TestResizeReachesMapping: growing a mapped volume's record grows what the
// mapping serves: List's size, a new NBD client's handshake, and IO past
// the old end (refused before).
func TestResizeReachesMapping(t *testing.T) {
	e := newAgentEnv(t)
	ctx := context.Background()
	a := e.newAgent(t, e.options(t, ""))
	m, err := a.Map(ctx, Spec{Volume: "v", Via: ViaNBDListen, Where: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(m.Url, "nbd://"), "/v")
	dev := served(t, a, "v")
	tail := randBytes(t, 4096)
	if err := dev.WriteAt(ctx, tail, envVolSize); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("write past the end before the resize: %v, want ErrOutOfRange", err)
	}
	const grown = 2 * envVolSize
	if _, err := e.store.ResizeVolume(ctx, "v", grown); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mapping to grow", func() bool { return a.List()[0].Size == grown && dev.Size() == grown })
	c, err := nbdtest.Dial(ctx, "tcp", addr, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Size() != grown {
		t.Fatalf("NBD handshake after the resize: size %d, want %d", c.Size(), grown)
	}
	if err := c.WriteAt(ctx, tail, envVolSize); err != nil {
		t.Fatalf("write past the old end over NBD: %v", err)
	}
	got := make([]byte, len(tail))
	if err := dev.ReadAt(ctx, got, envVolSize); err != nil || !bytes.Equal(got, tail) {
		t.Fatalf("read past the old end: %v, equal %v", err, bytes.Equal(got, tail))
	}
}
