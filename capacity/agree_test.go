package capacity

import (
	"context"
	"fmt"
	"testing"

	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/placement"
)

// TestViewsAgree: the capacity report and the controller read the same
// namespaces from etcd (meta.PlacementNamespace): same states, capacities,
// uses and fencing, and the same failure domains. The cluster has rack
// labels, an unfenced namespace, a draining one and allocated segments.
func TestViewsAgree(t *testing.T) {
	ctx := context.Background()
	s := memStore(t, "agree")
	var racked []host
	for i := range 5 {
		racked = append(racked, host{labels: map[string]string{"rack": fmt.Sprintf("r%d", i%4)}, size: int64(11+i) << 20, unfenced: i == 4})
	}
	initCluster(t, s, "rack", racked...)
	storetest.AddVolume(t, s, spec21("a", 16<<20), 4)
	if err := s.SetNamespaceState(ctx, "h1-n1", placement.StateDraining); err != nil {
		t.Fatal(err)
	}
	in, _, err := Load(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := controller.LoadSnapshot(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var ctl []placement.Namespace
	var hosts []placement.Host
	for _, n := range snap.State.Namespaces {
		ctl = append(ctl, placement.Namespace{ID: n.ID, Host: n.Host, State: n.State, Capacity: n.Capacity, Used: n.Used, Unfenced: n.Unfenced})
	}
	for _, h := range snap.State.Hosts {
		hosts = append(hosts, placement.Host(h))
	}
	if fmt.Sprint(in.Namespaces) != fmt.Sprint(ctl) {
		t.Fatalf("capacity reads namespaces\n%v\nthe controller\n%v", in.Namespaces, ctl)
	}
	var used int64
	for _, n := range in.Namespaces {
		used += n.Used
	}
	if used != 4*3 || !in.Namespaces[4].Unfenced {
		t.Fatalf("namespaces %v: want 12 slots used and h4-n1 unfenced", in.Namespaces)
	}
	a, err := placement.NewCluster(in.Hosts, in.Namespaces, in.DomainLabel)
	if err != nil {
		t.Fatal(err)
	}
	b, err := placement.NewCluster(hosts, ctl, in.DomainLabel)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ctl {
		if a.Domain(n.ID) != b.Domain(n.ID) {
			t.Errorf("namespace %s: domain %s for capacity, %s for the controller", n.ID, a.Domain(n.ID), b.Domain(n.ID))
		}
	}
}
