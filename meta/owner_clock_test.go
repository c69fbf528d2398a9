package meta

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta/memetcd"
)

// TestOwnerExpiresOnHandMovedClock: on an in-memory etcd whose lease clock
// the test moves, an owner whose lease runs out (its renewals fell behind:
// a partition, a pause) loses the volume the moment etcd expires the
// lease: its context ends with ErrLeaseLost, Valid fails for good, and the
// next owner gets a greater epoch. Until then nobody else may take the
// volume. The clock, not a wait, decides when the lease expires.
func TestOwnerExpiresOnHandMovedClock(t *testing.T) {
	ctx := testCtx(t)
	srv := memetcd.New(memetcd.Options{Clock: memetcd.NewClock(time.Unix(1_700_000_000, 0))})
	defer srv.Close()
	s, err := OpenClient(srv.Client(), Config{Cluster: "c"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	populate(t, s, 3, 1, 4)
	addVolume(t, s, "vol", 2, 1, 2)
	const ttl = 10 * time.Second
	a := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "node-a", TTL: ttl})
	srv.Clock().Advance(ttl - time.Second)
	if _, err := s.Acquire(ctx, "vol", OwnerOptions{Holder: "node-b", TTL: ttl}); !errors.Is(err, ErrBusy) {
		t.Fatalf("acquire while the lease lives: %v, want ErrBusy", err)
	}
	if err := a.Valid(); err != nil {
		t.Fatalf("owner before its lease expired: %v", err)
	}
	srv.Clock().Advance(ttl + time.Second) // past any renewal sent before
	select {
	case <-a.Context().Done():
	case <-ctx.Done():
		t.Fatal("the owner whose lease expired still runs")
	}
	if cause := context.Cause(a.Context()); !errors.Is(cause, ErrLeaseLost) {
		t.Fatalf("expired owner's context: %v, want ErrLeaseLost", cause)
	}
	if err := a.Valid(); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("expired owner's Valid: %v, want ErrLeaseLost", err)
	}
	b := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "node-b", TTL: ttl})
	defer b.Release(ctx)
	if b.Epoch() <= a.Epoch() {
		t.Fatalf("next owner's epoch %d, not after the expired one's %d", b.Epoch(), a.Epoch())
	}
}
