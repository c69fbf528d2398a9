package volclient

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta"
)

// silentListener accepts connections and never answers: a target that
// hangs in the handshake.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return l.Addr().String()
}

// TestDeviceDialsWithCallersContext: while namespace "hang" is being dialled
// (its target never answers), another namespace resolves; cancelling the
// caller's context ends the dial, and the namespace is not kept as
// unreachable (the next caller dials again).
func TestDeviceDialsWithCallersContext(t *testing.T) {
	ctx := context.Background()
	s, _, _, good := newServedNamespace(t)
	if _, err := s.AddNamespace(ctx, meta.NamespaceSpec{ID: "hang", Host: "h0", NQN: "nqn.test:hang", NSID: 1, Size: 8 << 20,
		Paths: []meta.PathRecord{{Addr: "tcp://" + silentListener(t)}}}); err != nil {
		t.Fatal(err)
	}
	n, err := NewNamespaces(ctx, s, NamespaceOptions{ConnectTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	dialCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := n.Device(dialCtx, "hang"); done <- err }()
	if _, err := n.Device(ctx, good.ID); err != nil {
		t.Fatalf("another namespace while one is dialled: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the hanging dial returned before its context ended: %v", err)
	default:
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled dial: %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the dial ignores its caller's context")
	}
	if d := n.known("hang"); d != nil {
		t.Errorf("a cancelled dial left %T kept for the namespace", d)
	}
}
