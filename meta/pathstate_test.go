package meta

import (
	"testing"
)

// TestSetPathStateUnchangedWritesNothing: recording the state a path
// already has writes nothing, so the nodes that all publish a host's
// failure cost one write per path, not one per node; a change is written.
func TestSetPathStateUnchangedWritesNothing(t *testing.T) {
	s := setup(t, 1, 1, 8)
	ctx := testCtx(t)
	n, err := s.Namespaces(ctx)
	if err != nil || len(n) != 1 || len(n[0].Paths) == 0 {
		t.Fatalf("namespaces %v %v", n, err)
	}
	id, addr := n[0].ID, n[0].Paths[0].Addr
	rev := func() int64 {
		t.Helper()
		r, err := s.get(ctx, s.keys.namespace(id), &NamespaceRecord{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, step := range []struct {
		state string
		group uint32
		write bool
	}{
		{ANAInaccessible, 0, true},
		{ANAInaccessible, 0, false},
		{ANAInaccessible, n[0].Paths[0].ANAGroup, false},
		{ANAInaccessible, n[0].Paths[0].ANAGroup + 1, true},
		{ANAInaccessible, 0, false},
		{ANAOptimized, 0, true},
		{ANAOptimized, 0, false},
	} {
		before := rev()
		if err := s.SetPathState(ctx, id, addr, step.group, step.state); err != nil {
			t.Fatal(err)
		}
		if wrote := rev() != before; wrote != step.write {
			t.Errorf("path %s to %s (group %d): wrote %v, want %v", addr, step.state, step.group, wrote, step.write)
		}
	}
	got, err := s.Namespace(ctx, id)
	if err != nil || got.Paths[0].ANAState != ANAOptimized || got.Paths[0].ANAGroup != n[0].Paths[0].ANAGroup+1 {
		t.Fatalf("after updates: %+v %v", got, err)
	}
}
