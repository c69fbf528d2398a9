package meta

import (
	"errors"
	"fmt"
	"testing"
)

// TestAddNamespaces: a batch is recorded as AddNamespace records each; a
// batch with one bad spec (a recorded or repeated NQN and NSID, a taken
// id, an unknown host, a bad field) records nothing.
func TestAddNamespaces(t *testing.T) {
	s := setup(t, 1, 1, 8)
	ctx := testCtx(t)
	if _, err := s.AddHost(ctx, "h9", nil); err != nil {
		t.Fatal(err)
	}
	spec := func(host string, nsid uint32) NamespaceSpec {
		return NamespaceSpec{Host: host, NQN: "nqn.2024-01.io.nvstripe:" + host, NSID: nsid, Size: 9 * testSlot,
			Paths: []PathRecord{{Addr: fmt.Sprintf("tcp://127.0.0.1:%d", 4500+nsid)}}}
	}
	for _, tc := range []struct {
		name  string
		specs []NamespaceSpec
		want  error
	}{
		{"recorded nqn and nsid", []NamespaceSpec{spec("h9", 1), spec("h0", 1)}, ErrExists},
		{"repeated in the batch", []NamespaceSpec{spec("h9", 1), spec("h9", 1)}, ErrExists},
		{"taken id", []NamespaceSpec{spec("h9", 1), {ID: "h0-n1", Host: "h9", NQN: "nqn.x", NSID: 1, Size: 9 * testSlot}}, ErrExists},
		{"unknown host", []NamespaceSpec{spec("h9", 1), spec("h8", 1)}, ErrNotFound},
		{"too small", []NamespaceSpec{spec("h9", 1), {Host: "h9", NQN: "nqn.y", NSID: 1, Size: testSlot}}, ErrInvalid},
	} {
		if _, err := s.AddNamespaces(ctx, tc.specs); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if n, err := s.Namespaces(ctx); err != nil || len(n) != 1 {
		t.Fatalf("after refused batches: %d namespaces (%v), want the first only", len(n), err)
	}
	var batch []NamespaceSpec
	for n := range uint32(namespacesPerTxn + 3) { // two transactions
		batch = append(batch, spec("h9", n+1))
	}
	recs, err := s.AddNamespaces(ctx, batch)
	if err != nil || len(recs) != len(batch) || recs[1].ID != "h9-n2" {
		t.Fatalf("batch: %v %v", recs, err)
	}
	if n, err := s.Namespaces(ctx); err != nil || len(n) != 1+len(batch) {
		t.Fatalf("after the batch: %d namespaces (%v), want %d", len(n), err, 1+len(batch))
	}
	for _, r := range recs {
		got, err := s.Namespace(ctx, r.ID)
		a, aerr := s.Allocation(ctx, r.ID)
		if err != nil || aerr != nil || got.Slots != 9 || got.State != "in" || a.Used != 0 {
			t.Errorf("%s: %+v %v, allocation %+v %v", r.ID, got, err, a, aerr)
		}
	}
}
