package volclient

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/nvmeof/target"
	"github.com/nvstripe/nvstripe/volclient/volclienttest"
)

func newClusterStore(t *testing.T) *meta.Store {
	t.Helper()
	ctx := context.Background()
	s, err := meta.Open(ctx, meta.Config{Endpoints: metatest.Start(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.InitCluster(ctx, meta.InitOptions{SlotSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddHost(ctx, "h0", nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// newServedNamespace is newClusterStore with one 8 MiB in-memory namespace
// served over NVMe/TCP and recorded on host h0.
func newServedNamespace(t *testing.T) (*meta.Store, *meta.ClusterRecord, *target.Target, *meta.NamespaceRecord) {
	t.Helper()
	s := newClusterStore(t)
	c, err := s.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mem, err := blockdev.NewMem(8<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	tgt, rec := volclienttest.ServeNamespace(t, s, c, 1, mem)
	return s, c, tgt, rec
}

// TestAddNamespaceLabels: a blank namespace is recorded at its size and
// labelled for the cluster; another cluster refuses it; a path where
// nothing answers is a ConnectError; Discover finds the namespace recorded.
func TestAddNamespaceLabels(t *testing.T) {
	ctx := context.Background()
	mem, err := blockdev.NewMem(8<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	tgt := volclienttest.StartTarget(t, 0, "127.0.0.1:0", mem)
	spec := meta.NamespaceSpec{Host: "h0", NQN: volclienttest.NQN(0), NSID: 1, Paths: []meta.PathRecord{{Addr: "tcp://" + tgt.Addr(0)}}}
	s := newClusterStore(t)
	rec, err := AddNamespace(ctx, s, spec, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckLabel(ctx, mem, c.Label(rec.ID)); err != nil || rec.Size != 8<<20 {
		t.Errorf("recorded %d bytes; label: %v", rec.Size, err)
	}
	if _, err := AddNamespace(ctx, newClusterStore(t), spec, ""); !errors.Is(err, meta.ErrLabelMismatch) {
		t.Errorf("another cluster adding a labelled namespace: %v", err)
	}
	bad := spec
	bad.Paths = []meta.PathRecord{{Addr: "tcp://127.0.0.1:1"}}
	if _, err := AddNamespace(ctx, s, bad, ""); !errors.As(err, new(*ConnectError)) {
		t.Errorf("nothing answering: %v, want a ConnectError", err)
	}
	var seen []Discovered
	n, err := Discover(ctx, s, "tcp://"+tgt.Addr(0), "h0", "", 4, false, func(d Discovered) { seen = append(seen, d) })
	if err != nil || n != 1 || len(seen) != 1 || seen[0].Known != rec.ID {
		t.Errorf("Discover: %d subsystems, %+v, %v", n, seen, err)
	}
	all, err := DiscoverAll(ctx, s, "tcp://"+tgt.Addr(0), "h0", "", 4, false, nil)
	if err != nil || all.Subsystems != 1 || len(all.Added) != 0 || len(all.Known) != 1 || all.Known[0] != rec.ID {
		t.Errorf("DiscoverAll: %+v, %v", all, err)
	}
	if js, _ := json.Marshal(all); !strings.Contains(string(js), `"added":[]`) {
		t.Errorf("DiscoverAll JSON %s: want an empty added list, not null", js)
	}
}
