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
	"github.com/nvstripe/nvstripe/nvmeof/initiator"
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

// TestDiscoverTwoSubsystems: a host exporting two subsystems, each with
// nsid 1, gets both recorded (HOST-n1, then one named after the second
// subsystem), each labelled with its own id; a rerun adds nothing and
// reports both as recorded; `ns add` without an id for the second refuses
// the taken default id, asking for --id, before labelling anything.
func TestDiscoverTwoSubsystems(t *testing.T) {
	ctx := context.Background()
	var mems [2]*blockdev.Mem
	var subs []target.SubsystemConfig
	for i := range mems {
		var err error
		if mems[i], err = blockdev.NewMem(8<<20, 4096); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, target.SubsystemConfig{NQN: volclienttest.NQN(i), AllowedHosts: []string{initiator.DefaultHostNQN},
			Namespaces: []target.NamespaceConfig{{NSID: 1, Device: mems[i]}}})
	}
	tgt, err := target.New(target.Config{Subsystems: subs, Listeners: []target.ListenerConfig{{Address: "127.0.0.1:0"}}})
	if err == nil {
		err = tgt.Start(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tgt.Close() })
	addr := "tcp://" + tgt.Addr(0)

	s := newClusterStore(t)
	c, err := s.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := DiscoverAll(ctx, s, addr, "h0", "", 4, true, nil)
	if err != nil || rep.Subsystems != 2 || len(rep.Added) != 2 {
		t.Fatalf("DiscoverAll: %+v, %v; want 2 subsystems, 2 added", rep, err)
	}
	want := []string{"h0-n1", "h0-test-t1-n1"}
	for i, rec := range rep.Added {
		if rec.ID != want[i] || rec.NQN != volclienttest.NQN(i) || rec.NSID != 1 {
			t.Errorf("added %d: %s %s nsid %d, want %s %s nsid 1", i, rec.ID, rec.NQN, rec.NSID, want[i], volclienttest.NQN(i))
		}
		if err := CheckLabel(ctx, mems[i], c.Label(want[i])); err != nil {
			t.Errorf("subsystem %d label: %v", i, err)
		}
	}
	again, err := DiscoverAll(ctx, s, addr, "h0", "", 4, true, nil)
	if err != nil || len(again.Added) != 0 || strings.Join(again.Known, ",") != strings.Join(want, ",") {
		t.Errorf("rerun: %+v, %v; want %v already recorded", again, err, want)
	}

	fresh := newClusterStore(t)
	first := meta.NamespaceSpec{Host: "h0", NQN: volclienttest.NQN(0), NSID: 1, Size: 8 << 20, Paths: []meta.PathRecord{{Addr: addr}}}
	if _, err := fresh.AddNamespace(ctx, first); err != nil {
		t.Fatal(err)
	}
	blank, err := blockdev.NewMem(8<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	second := first
	second.NQN, second.Size = volclienttest.NQN(1), 0
	tgt2 := volclienttest.StartTarget(t, 1, "127.0.0.1:0", blank)
	second.Paths = []meta.PathRecord{{Addr: "tcp://" + tgt2.Addr(0)}}
	_, err = AddNamespace(ctx, fresh, second, "")
	if !errors.Is(err, meta.ErrExists) || !strings.Contains(err.Error(), "--id") {
		t.Errorf("ns add of a second subsystem's nsid 1 without --id: %v; want ErrExists asking for --id", err)
	}
	fc, err := fresh.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckLabel(ctx, blank, fc.Label("h0-n1")); !errors.Is(err, meta.ErrNoLabel) {
		t.Errorf("refused namespace's label: %v; want none written", err)
	}
	second.ID = "h0-b-n1"
	if rec, err := AddNamespace(ctx, fresh, second, ""); err != nil || rec.ID != second.ID {
		t.Errorf("ns add --id %s: %+v, %v", second.ID, rec, err)
	}
}
