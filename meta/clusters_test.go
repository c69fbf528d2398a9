package meta

import (
	"slices"
	"testing"
)

// TestClusterNames lists the initialized clusters of an etcd of its own,
// not those whose keys exist without a cluster record, and finds clusters
// whose names sort around each other's keys.
func TestClusterNames(t *testing.T) {
	s, etcd := privateStore(t)
	ctx := testCtx(t)
	if names, err := s.ClusterNames(ctx); err != nil || len(names) != 0 {
		t.Fatalf("empty etcd: %q, %v", names, err)
	}
	for _, name := range []string{"b", "a.x", "a", "a0"} {
		populate(t, etcd.open(t, name), 1, 0, 0)
	}
	if _, err := s.cli.Put(ctx, clustersRoot+"stray/hosts/h", "{}"); err != nil {
		t.Fatal(err)
	}
	names, err := s.ClusterNames(ctx)
	if want := []string{"a", "a.x", "a0", "b"}; err != nil || !slices.Equal(names, want) {
		t.Errorf("ClusterNames = %q, %v; want %q", names, err, want)
	}
}
