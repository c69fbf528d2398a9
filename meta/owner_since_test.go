package meta

import (
	"errors"
	"testing"
)

// TestOwnersSince: the owners that acquired a volume after an epoch are
// found in etcd's history even when they have released it since; none
// after the latest; and a compacted history says so.
func TestOwnersSince(t *testing.T) {
	s := setup(t, 3, 1, 4)
	addVolume(t, s, "vol", 2, 1, 2)
	addVolume(t, s, "other", 2, 1, 2)
	ctx := testCtx(t)
	first := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "node-a"})
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.OwnersSince(ctx, "vol", first.Epoch()); err != nil || len(got) != 0 {
		t.Fatalf("owners since the only one: %+v, %v", got, err)
	}
	// Another volume's owners are not this one's.
	o := takeOwner(t, ctx, s, "other", OwnerOptions{Holder: "node-c"})
	defer o.Release(ctx)
	if got, err := s.OwnersSince(ctx, "vol", first.Epoch()); err != nil || len(got) != 0 {
		t.Fatalf("owners since, with another volume owned: %+v, %v", got, err)
	}
	second := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "node-b"})
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ro := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "node-r", ReadOnly: true})
	defer ro.Release(ctx)
	got, err := s.OwnersSince(ctx, "vol", first.Epoch())
	if err != nil {
		t.Fatal(err)
	}
	want := []OwnerInfo{{Holder: "node-b", Mode: ModeRW, Epoch: second.Epoch()}, {Holder: "node-r", Mode: ModeRO, Epoch: ro.Epoch()}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("owners since epoch %d: %+v, want %+v", first.Epoch(), got, want)
	}
}

// TestOwnersSinceCompacted: once the history after an epoch is compacted
// away, OwnersSince cannot tell and says so.
func TestOwnersSinceCompacted(t *testing.T) {
	ctx := testCtx(t)
	s, etcd := privateStore(t)
	populate(t, s, 3, 1, 4)
	addVolume(t, s, "vol", 2, 1, 2)
	o := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "node-a"})
	if err := o.Release(ctx); err != nil {
		t.Fatal(err)
	}
	etcd.compact(t)
	if _, err := s.OwnersSince(ctx, "vol", o.Epoch()); !errors.Is(err, ErrCompacted) {
		t.Fatalf("owners since a compacted revision: %v, want ErrCompacted", err)
	}
}

// TestLastRW: each owner learns from its own claim which read-write owner
// acquired the volume last before it (read-only owners are not recorded),
// also after that one released it; a deleted and recreated volume starts
// with none.
func TestLastRW(t *testing.T) {
	s := setup(t, 3, 1, 4)
	addVolume(t, s, "vol", 2, 1, 2)
	ctx := testCtx(t)
	acquire := func(holder string, ro bool, wantLast string, wantEpoch int64) *Owner {
		t.Helper()
		o := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: holder, ReadOnly: ro})
		if got := o.LastRW(); got.Holder != wantLast || got.Epoch != wantEpoch || (wantLast != "" && got.Mode != ModeRW) {
			t.Errorf("%s's last read-write owner: %+v, want %q of epoch %d", holder, got, wantLast, wantEpoch)
		}
		if err := o.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return o
	}
	a := acquire("node-a", false, "", 0)
	acquire("reader", true, "node-a", a.Epoch())
	b := acquire("node-b", false, "node-a", a.Epoch())
	acquire("node-a", false, "node-b", b.Epoch())
	if err := s.DeleteVolume(ctx, "vol"); err != nil {
		t.Fatal(err)
	}
	addVolume(t, s, "vol", 2, 1, 2)
	acquire("node-c", false, "", 0)
}
