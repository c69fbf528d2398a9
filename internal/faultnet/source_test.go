package faultnet

import (
	"net/netip"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

var (
	srcA = netip.MustParseAddr("127.0.0.2") // the client the rules name
	srcB = netip.MustParseAddr("127.0.0.3") // another client
)

// TestPartitionFrom partitions client A only: its open connection is
// closed and a new one from it is closed at once, while B's open
// connection and a new one from B go on; after Heal A connects again.
func TestPartitionFrom(t *testing.T) {
	_, p := newProxy(t)
	a, b := testutil.DialFrom(t, srcA.String(), p.Addr()), testutil.DialFrom(t, srcB.String(), p.Addr())
	mustPass(t, a, "a1", "A before the partition")
	mustPass(t, b, "b1", "B before the partition")
	p.PartitionFrom(srcA)
	a.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := a.Read(make([]byte, 2)); err == nil {
		t.Fatalf("A's open connection read %d bytes across its partition", n)
	}
	if got, err := roundTrip(t, testutil.DialFrom(t, srcA.String(), p.Addr()), "a2", 10*time.Second); err == nil {
		t.Fatalf("a new connection from A passed %q across its partition", got)
	}
	mustPass(t, b, "b2", "B's open connection while A is partitioned")
	mustPass(t, testutil.DialFrom(t, srcB.String(), p.Addr()), "b3", "a new connection from B while A is partitioned")
	if a, b := p.Cut(srcA), p.Cut(srcB); a != 2 || b != 0 {
		t.Errorf("connections cut: %d from A, %d from B; want A's open one and its new one, none of B's", a, b)
	}
	p.Heal()
	mustPass(t, testutil.DialFrom(t, srcA.String(), p.Addr()), "a3", "A after Heal")
}

// TestStallFromResetFrom stalls client A only (B's bytes move; A's move
// again on Resume), then resets A's connections only.
func TestStallFromResetFrom(t *testing.T) {
	_, p := newProxy(t)
	a, b := testutil.DialFrom(t, srcA.String(), p.Addr()), testutil.DialFrom(t, srcB.String(), p.Addr())
	mustPass(t, a, "a1", "A before the stall")
	p.StallFrom(srcA)
	if got, err := roundTrip(t, a, "a2", 100*time.Millisecond); err == nil {
		t.Fatalf("stalled A passed %q", got)
	}
	mustPass(t, b, "b1", "B while A is stalled")
	p.Resume()
	if got, err := readBack(a, 2, 10*time.Second); got != "a2" {
		t.Fatalf("A after Resume: %q, %v", got, err)
	}
	p.ResetFrom(srcA)
	a.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := a.Read(make([]byte, 2)); err == nil {
		t.Fatalf("A read %d bytes after ResetFrom", n)
	}
	mustPass(t, b, "b2", "B after A's reset")
}
