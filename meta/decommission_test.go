package meta

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/placement"
)

// TestDecommission: a namespace holding slots cannot be removed (ErrBusy,
// the count and what to do); an empty one can; a host with namespaces is
// refused unless --force, which takes its empty namespaces with it and still
// refuses while one holds slots.
func TestDecommission(t *testing.T) {
	s := setup(t, 3, 1, 8)
	ctx := testCtx(t)
	vm := addVolume(t, s, "v", 1, 1, 1)
	refs, err := vm.Allocate(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	busy := refs[0].NS
	err = s.RemoveNamespace(ctx, busy)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "still holds 1 slots: drain it first") {
		t.Errorf("remove %s holding a slot: %v", busy, err)
	}
	host := strings.TrimSuffix(busy, "-n1")
	if _, err := s.RemoveHost(ctx, host, false); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "has 1 namespaces ("+busy+")") {
		t.Errorf("remove host %s without --force: %v", host, err)
	}
	if _, err := s.RemoveHost(ctx, host, true); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "still holds 1 slots") {
		t.Errorf("remove host %s with --force, its namespace holding a slot: %v", host, err)
	}
	var empty string
	for _, h := range []string{"h0", "h1", "h2"} {
		if h+"-n1" != refs[0].NS && h+"-n1" != refs[1].NS {
			empty = h
		}
	}
	ids, err := s.RemoveHost(ctx, empty, true)
	if err != nil || len(ids) != 1 || ids[0] != empty+"-n1" {
		t.Fatalf("remove empty host %s with --force: %v, %v", empty, ids, err)
	}
	if _, err := s.AddHost(ctx, "bare", nil); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.RemoveHost(ctx, "bare", false); err != nil || ids == nil || len(ids) != 0 {
		t.Errorf("remove a host without namespaces: %#v, %v, want an empty list", ids, err)
	}
	if _, err := s.Namespace(ctx, empty+"-n1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("namespace of the removed host: %v, want ErrNotFound", err)
	}
	if _, err := s.Allocation(ctx, empty+"-n1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("allocation of the removed namespace: %v, want ErrNotFound", err)
	}
	if err := s.RemoveNamespace(ctx, "nope"); !errors.Is(err, ErrNotFound) || err.Error() != `namespace "nope" not found` {
		t.Errorf("remove a namespace that does not exist: %v", err)
	}
}

// TestReturnNamespace: an out namespace comes back in, reinstating the
// slots it holds, or empty; a namespace that is not out is left alone; the
// note goes when it leaves service again.
func TestReturnNamespace(t *testing.T) {
	s := setup(t, 2, 1, 8)
	ctx := testCtx(t)
	vm := addVolume(t, s, "v", 1, 1, 1)
	refs, err := vm.Allocate(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	if back, err := s.ReturnNamespace(ctx, refs[0].NS, at); back != nil || err != nil {
		t.Errorf("return of a namespace in service: %+v, %v", back, err)
	}
	if err := s.SetNamespaceState(ctx, refs[0].NS, placement.StateOut); err != nil {
		t.Fatal(err)
	}
	back, err := s.ReturnNamespace(ctx, refs[0].NS, at)
	if err != nil || back == nil || back.Slots != 1 {
		t.Fatalf("return: %+v, %v", back, err)
	}
	want := "back 2026-12-01T18:00:00Z: its 1 slots are reinstated (blocks written while it was away are repaired from the stale log)"
	rec, err := s.Namespace(ctx, refs[0].NS)
	if err != nil || rec.State != "in" || rec.Returned == nil || rec.Returned.Note() != want {
		t.Errorf("returned record %+v, %v; want note %q", rec, err, want)
	}
	if err := s.SetNamespaceState(ctx, refs[0].NS, placement.StateDown); err != nil {
		t.Fatal(err)
	}
	if rec, _ := s.Namespace(ctx, refs[0].NS); rec.Returned != nil {
		t.Errorf("note kept after the namespace went down: %+v", rec.Returned)
	}
	empty := NamespaceReturn{At: at}
	if got := empty.Note(); got != "back 2026-12-01T18:00:00Z: its slots were rebuilt elsewhere; it holds no data now and takes new slots" {
		t.Errorf("note of an empty return: %q", got)
	}
}
