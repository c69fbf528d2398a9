package meta

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// TestMoverBesideReaders: a mover's read-write lease and read-only leases
// share a volume, in either order; an ordinary read-write lease shares it
// with nobody, and there is one read-write lease at a time.
func TestMoverBesideReaders(t *testing.T) {
	s := setup(t, 3, 1, 4)
	addVolume(t, s, "vol", 2, 1, 2)
	ctx := testCtx(t)
	acquire := func(holder string, o OwnerOptions) (*Owner, error) {
		o.Holder = holder
		return s.Acquire(ctx, "vol", o)
	}
	r1, err := acquire("r1", OwnerOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acquire("rw", OwnerOptions{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("read-write owner beside a reader: %v", err)
	}
	mv, err := acquire("ctl", OwnerOptions{Mover: true})
	if err != nil {
		t.Fatalf("mover beside a reader: %v", err)
	}
	if _, err := acquire("r2", OwnerOptions{ReadOnly: true}); err != nil {
		t.Fatalf("reader beside a mover: %v", err)
	}
	if _, err := acquire("r1", OwnerOptions{ReadOnly: true}); !errors.Is(err, ErrBusy) {
		t.Fatalf("the same reader twice: %v", err)
	}
	for _, o := range []OwnerOptions{{}, {Mover: true}} {
		if _, err := acquire("other", o); !errors.Is(err, ErrBusy) {
			t.Fatalf("second read-write owner (mover %v) beside a mover: %v", o.Mover, err)
		}
	}
	if err := r1.SetApplied(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if err := mv.SetApplied(ctx, 7); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a mover publishing an applied revision: %v", err)
	}
	if r1.Context().Err() != nil {
		t.Fatal("publishing the applied revision ended the reader's ownership")
	}
	rs, err := s.Readers(ctx, "vol")
	if err != nil || rs["r1"] != 7 || rs["r2"] != 0 || len(rs) != 2 {
		t.Fatalf("readers %v, %v: want r1 at 7 and r2 at 0", rs, err)
	}
}

// fataler is what the rig's helpers need of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// followRig is a volume with segment 0 allocated, a mover that moved its
// shard 0 and committed, and the revision of the commit.
type followRig struct {
	s      *Store
	vm     *VolumeMap // the mover's
	mover  *Owner
	from   SlotRef // the old slot
	commit int64
}

// moveAndCommit takes the volume as a mover, moves shard 0 of segment 0
// and commits.
func moveAndCommit(t fataler, ctx context.Context, s *Store, vol string) *followRig {
	t.Helper()
	r := &followRig{s: s}
	r.takeOver(t, ctx, vol)
	rec, err := r.vm.Segment(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.from = rec.Slots[0]
	if _, err := r.vm.BeginMove(ctx, 0, 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := r.vm.CommitMove(ctx, 0); err != nil {
		t.Fatal(err)
	}
	resp, err := s.kv.Get(ctx, s.keys.segment(vol, 0))
	if err != nil {
		t.Fatal(err)
	}
	r.commit = resp.Kvs[0].ModRevision
	return r
}

// takeOver acquires the volume as a (new) mover: a controller restart.
func (r *followRig) takeOver(t fataler, ctx context.Context, vol string) {
	t.Helper()
	if r.mover != nil {
		if err := r.mover.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if r.mover, err = r.s.Acquire(ctx, vol, OwnerOptions{Holder: "ctl", Mover: true}); err != nil {
		t.Fatal(err)
	}
	if r.vm, err = r.s.VolumeMap(ctx, vol, r.mover); err != nil {
		t.Fatal(err)
	}
}

// released reports whether the old slot is free and the move gone.
func (r *followRig) released(t fataler, ctx context.Context) bool {
	t.Helper()
	a, err := r.s.Allocation(ctx, r.from.NS)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.vm.Segment(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.isSet(r.from.Slot) != (rec.Move != nil) {
		t.Fatalf("old slot allocated %v, move record %+v: one without the other", a.isSet(r.from.Slot), rec.Move)
	}
	return rec.Move == nil
}

// TestFinishMoveWaitsForReaders walks the protocol: readers that were
// mapped at the commit hold the old slot until each has published the
// commit's revision or lost its lease; a reader mapped after the commit
// holds nothing; a mover that stops while waiting (a controller restart)
// leaves the move committed and the slot reserved, and the next mover
// finishes it once the last reader follows, through FinishMoveFollowed.
func TestFinishMoveWaitsForReaders(t *testing.T) {
	s := setup(t, 4, 1, 4)
	vm := addVolume(t, s, "vol", 2, 1, 1)
	ctx := testCtx(t)
	if _, err := vm.Allocate(ctx, 0); err != nil {
		t.Fatal(err)
	}
	readers := map[string]*Owner{}
	for _, h := range []string{"lag", "follow", "dies"} {
		o := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: h, ReadOnly: true})
		readers[h] = o
	}
	r := moveAndCommit(t, ctx, s, "vol")
	var behind *ReadersBehindError
	if err := r.vm.FinishMove(ctx, 0); !errors.As(err, &behind) || len(behind.Readers) != 3 || behind.Commit != r.commit {
		t.Fatalf("finish with three readers behind: %v", err)
	}
	if r.released(t, ctx) {
		t.Fatal("released under readers")
	}
	if err := readers["follow"].SetApplied(ctx, r.commit); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cli.Revoke(ctx, readers["dies"].lease); err != nil { // its lease expires
		t.Fatal(err)
	}
	late := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "late", ReadOnly: true})
	defer late.Release(ctx)
	if err := readers["lag"].SetApplied(ctx, r.commit-1); err != nil {
		t.Fatal(err)
	}
	if err := r.vm.FinishMove(ctx, 0); !errors.As(err, &behind) || len(behind.Readers) != 1 || behind.Readers[0] != fmt.Sprintf("lag (applied %d)", r.commit-1) {
		t.Fatalf("finish with only lag behind: %v", err)
	}
	// The mover gives up waiting and goes: a controller restart.
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() { waited <- r.vm.FinishMoveFollowed(wctx, 0) }()
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("an abandoned wait: %v", err)
	}
	r.takeOver(t, ctx, "vol")
	if r.released(t, ctx) {
		t.Fatal("released while lag lags, across a mover restart")
	}
	done := make(chan error, 1)
	go func() { done <- r.vm.FinishMoveFollowed(ctx, 0) }()
	if err := readers["lag"].SetApplied(ctx, r.commit); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !r.released(t, ctx) {
		t.Fatal("the move was not finished once every reader followed")
	}
}

// TestPropertyFinishMoveFollowed: with readers mapped before and after a
// commit, each of which publishes some revision around the commit or loses
// its lease, FinishMove releases the old slot exactly when no reader mapped
// before the commit is both alive and short of it.
func TestPropertyFinishMoveFollowed(t *testing.T) {
	s := setup(t, 4, 1, 400)
	ctx := testCtx(t)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		vol := fmt.Sprintf("v%d", n)
		vm := addVolume(t, s, vol, 2, 1, 1)
		if _, err := vm.Allocate(ctx, 0); err != nil {
			rt.Fatal(err)
		}
		var owners []*Owner
		defer func() {
			for _, o := range owners {
				_ = o.Release(ctx)
			}
		}()
		acquire := func(i int) *Owner {
			o, err := s.Acquire(ctx, vol, OwnerOptions{Holder: fmt.Sprintf("r%d", i), ReadOnly: true})
			if err != nil {
				rt.Fatal(err)
			}
			owners = append(owners, o)
			return o
		}
		early := rapid.IntRange(0, 4).Draw(rt, "early")
		for i := range early {
			acquire(i)
		}
		r := moveAndCommit(rt, ctx, s, vol)
		owners = append(owners, r.mover)
		for i := range rapid.IntRange(0, 2).Draw(rt, "late") {
			acquire(early + i)
		}
		blocking := false
		for i := range early {
			switch rapid.IntRange(0, 3).Draw(rt, fmt.Sprintf("r%d", i)) {
			case 0: // never publishes
				blocking = true
			case 1: // short of the commit
				if err := owners[i].SetApplied(ctx, r.commit-1); err != nil {
					rt.Fatal(err)
				}
				blocking = true
			case 2: // follows
				if err := owners[i].SetApplied(ctx, r.commit+int64(rapid.IntRange(0, 3).Draw(rt, "past"))); err != nil {
					rt.Fatal(err)
				}
			case 3: // its lease goes
				if _, err := s.cli.Revoke(ctx, owners[i].lease); err != nil {
					rt.Fatal(err)
				}
			}
		}
		err := r.vm.FinishMove(ctx, 0)
		if blocking != errors.Is(err, ErrReadersBehind) || !blocking && err != nil {
			rt.Fatalf("finish: %v; want readers behind: %v", err, blocking)
		}
		if r.released(rt, ctx) == blocking {
			rt.Fatalf("old slot released %v with readers behind %v", !blocking, blocking)
		}
	})
}
