package meta

import (
	"context"
	"errors"
	"testing"
	"time"
)

// waitDone waits for ctx to end, failing after a generous bound (this is a
// hang guard, not a timing assertion).
func waitDone(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: owner context still live", what)
	}
}

func TestOwnerExclusiveAndShared(t *testing.T) {
	s := setup(t, 3, 1, 4)
	addVolume(t, s, "vol", 2, 1, 2)
	ctx := testCtx(t)
	rw := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "node-a"})
	_, err := s.Acquire(ctx, "vol", OwnerOptions{Holder: "node-b"})
	var busy *BusyError
	if !errors.As(err, &busy) || !errors.Is(err, ErrBusy) {
		t.Fatalf("second read-write owner: %v", err)
	}
	if !busy.Has(rw.Epoch()) || busy.Has(rw.Epoch()+1) || busy.Owners[0].Holder != "node-a" {
		t.Errorf("second read-write owner refused by %+v, want node-a of epoch %d", busy.Owners, rw.Epoch())
	}
	if _, err := s.Acquire(ctx, "vol", OwnerOptions{Holder: "node-b", ReadOnly: true}); !errors.Is(err, ErrBusy) {
		t.Fatalf("read-only owner next to a read-write one: %v", err)
	}
	if err := s.DeleteVolume(ctx, "vol"); !errors.Is(err, ErrBusy) {
		t.Fatalf("delete of a mapped volume: %v", err)
	}
	if err := rw.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.Release(ctx); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if context.Cause(rw.Context()) != context.Canceled {
		t.Fatalf("released owner's context: %v", context.Cause(rw.Context()))
	}
	ro1 := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "node-b", ReadOnly: true})
	ro2 := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "node-c", ReadOnly: true})
	if _, err := s.Acquire(ctx, "vol", OwnerOptions{Holder: "node-a"}); !errors.Is(err, ErrBusy) {
		t.Fatalf("read-write owner next to read-only ones: %v", err)
	}
	owners, err := s.Owners(ctx, "vol")
	if err != nil || len(owners) != 2 {
		t.Fatalf("owners: %+v %v", owners, err)
	}
	_ = ro1.Release(ctx)
	_ = ro2.Release(ctx)
	if _, err := s.Acquire(ctx, "missing", OwnerOptions{Holder: "a"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("acquire of a missing volume: %v", err)
	}
}

// TestOwnerEpochGrows: every new owner has a higher epoch than the last.
func TestOwnerEpochGrows(t *testing.T) {
	s := setup(t, 3, 1, 4)
	addVolume(t, s, "vol", 2, 1, 2)
	ctx := testCtx(t)
	var last int64
	for i := range 3 {
		o := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "node-a"})
		if o.Epoch() <= last {
			t.Fatalf("owner %d: epoch %d after %d", i, o.Epoch(), last)
		}
		last = o.Epoch()
		if err := o.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOwnerLeaseLostStopsOwner: revoking the lease from another client
// cancels the owner's context with ErrLeaseLost, and every fenced write of
// its VolumeMap fails with ErrLeaseLost, even after a new owner took over.
func TestOwnerLeaseLostStopsOwner(t *testing.T) {
	s := setup(t, 3, 1, 4)
	addVolume(t, s, "vol", 2, 1, 4)
	ctx := testCtx(t)
	o := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "node-a"})
	vm, err := s.VolumeMap(ctx, "vol", o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vm.Allocate(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := vm.MarkDirty(ctx, 0); err != nil {
		t.Fatal(err)
	}
	revokeOwner(t, ctx, s, "vol", o)
	if cause := context.Cause(o.Context()); !errors.Is(cause, ErrLeaseLost) {
		t.Fatalf("cause %v, want ErrLeaseLost", cause)
	}
	next := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "node-b"})
	defer next.Release(ctx)
	if next.Epoch() <= o.Epoch() {
		t.Fatalf("new epoch %d not above %d", next.Epoch(), o.Epoch())
	}
	if err := vm.MarkDirty(ctx, 1); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("mark dirty by the old owner: %v", err)
	}
	if _, err := vm.Allocate(ctx, 1); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("allocate by the old owner: %v", err)
	}
	if err := vm.Free(ctx, 0); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("free by the old owner: %v", err)
	}
	if err := vm.MarkClean(ctx, []int64{0}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("mark clean by the old owner: %v", err)
	}
}

func TestLeaderElection(t *testing.T) {
	s := newStore(t)
	ctx := testCtx(t)
	l, err := s.Campaign(ctx, "ctl-1", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if who, err := s.Leader(ctx); err != nil || who != "ctl-1" {
		t.Fatalf("leader %q %v", who, err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := s.Campaign(short, "ctl-2", 2*time.Second); err == nil {
		t.Fatal("second campaign won while the first leader holds")
	}
	if err := l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	waitDone(t, l.Context(), "after resign")
	l2, err := s.Campaign(ctx, "ctl-2", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Resign(ctx)
	if who, _ := s.Leader(ctx); who != "ctl-2" {
		t.Fatalf("leader after resign: %q", who)
	}
}

// TestRenewMargin pins the owner's own safety margin: the owner stops at
// TTL - margin after the last answered renewal, before etcd can expire the
// lease and grant the volume to someone else.
func TestRenewMargin(t *testing.T) {
	for _, c := range []struct{ ttl, want time.Duration }{
		{2 * time.Second, time.Second}, {5 * time.Second, time.Second},
		{10 * time.Second, 2 * time.Second}, {60 * time.Second, 12 * time.Second},
	} {
		if got := renewMargin(c.ttl); got != c.want {
			t.Errorf("renewMargin(%v) = %v, want %v", c.ttl, got, c.want)
		}
	}
}

// TestOwnerLose: an owner told from elsewhere that it is stale (the storage
// fenced it) ends at once: its context is done with a cause carrying both
// the reason and ErrLeaseLost. (Its etcd writes are refused by the owner
// key's revision, as soon as a newer owner holds the key.)
func TestOwnerLose(t *testing.T) {
	s := setup(t, 3, 1, 4)
	addVolume(t, s, "vol", 2, 1, 4)
	ctx := testCtx(t)
	o := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "node-a"})
	defer o.Release(ctx)
	why := errors.New("refused by the storage")
	o.Lose(why)
	waitDone(t, o.Context(), "after Lose")
	if cause := context.Cause(o.Context()); !errors.Is(cause, ErrLeaseLost) || !errors.Is(cause, why) {
		t.Fatalf("cause %v, want ErrLeaseLost and the reason", cause)
	}
}
