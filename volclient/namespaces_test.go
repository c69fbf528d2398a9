package volclient

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/faultnet"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volclient/volclienttest"
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

// TestProbeConcurrentKeepsOneDevice: probes of one namespace that come back
// at once keep one connected device; the others close theirs, so that once
// the set is closed the target has no connection left (a leaked device
// keeps its queues open).
func TestProbeConcurrentKeepsOneDevice(t *testing.T) {
	ctx := context.Background()
	mem, err := blockdev.NewMem(8<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	tgt := volclienttest.StartTarget(t, 0, "127.0.0.1:0", mem)
	px, err := faultnet.New(tgt.Addr(0))
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	s := newClusterStore(t)
	rec, err := AddNamespace(ctx, s, meta.NamespaceSpec{Host: "h0", NQN: volclienttest.NQN(0), NSID: 1,
		Paths: []meta.PathRecord{{Addr: "tcp://" + px.Addr()}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	px.Partition()
	n, err := NewNamespaces(ctx, s, NamespaceOptions{ConnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Device(ctx, rec.ID); err != nil {
		t.Fatalf("an unreachable namespace: %v, want a stand-in", err)
	}
	px.Heal()
	const probes = 8
	errs := make(chan error, probes)
	start := make(chan struct{})
	for range probes {
		go func() { <-start; errs <- n.Probe(ctx, rec.ID) }()
	}
	close(start)
	for range probes {
		if err := <-errs; err != nil {
			t.Errorf("probe after the heal: %v", err)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second) // a hang guard
	for tgt.Stats().Connections > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open at the target after Close: a probe's device leaked", tgt.Stats().Connections)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
