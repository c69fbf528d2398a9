package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/placement"
)

// FuzzServiceRequests sends the admin API's requests that change the
// cluster (Rebalance, Drain, Fail), with whatever fields an API client
// puts in them, to the service over an embedded etcd holding the fixture
// (seven hosts, so that one can be drained). Nothing may panic; a refused
// request changes nothing in etcd and fails with class ErrInvalid or
// ErrNotFound; an accepted one had valid fields (a rebalance threshold
// strictly between 0 and 1, a recorded namespace or host) and did what it
// says. A request that changed the cluster leaves it to the next input on
// a fresh fixture (a cluster of its own in the same etcd). The seed corpus
// is in testdata/fuzz.
func FuzzServiceRequests(f *testing.F) {
	f.Add(byte(0), "", 0.1, false)
	f.Add(byte(0), "", 0.5, true)
	f.Add(byte(1), "h6", 0.0, false)
	f.Add(byte(1), "h0-n1", 0.0, false)
	f.Add(byte(2), "h1-n1", 0.0, false)
	f.Add(byte(2), "nope", 0.0, false)
	etcd := metatest.Mem(f)
	n := 0
	cluster := func() string { return fmt.Sprintf("fuzz%d", n) }
	fixtureAt(f, etcd, cluster(), 7)
	f.Fuzz(func(t *testing.T, op byte, name string, threshold float64, apply bool) {
		s, err := meta.OpenClient(etcd.Client(), meta.Config{Cluster: cluster()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		before := revision(t, s)
		ok := runRequest(t, NewService(s), op, name, threshold, apply)
		if after := revision(t, s); after != before {
			if !ok {
				t.Fatalf("refused request (op %d, %q, %g, %v) changed etcd (revision %d to %d)", op, name, threshold, apply, before, after)
			}
			n++
			fixtureAt(t, etcd, cluster(), 7)
		}
	})
}

// runRequest sends one request and checks its answer; it reports whether
// the request was accepted.
func runRequest(t *testing.T, svc *Service, op byte, name string, threshold float64, apply bool) bool {
	ctx := context.Background()
	var err error
	switch op % 3 {
	case 0:
		_, err = svc.Rebalance(ctx, &RebalanceRequest{Threshold: threshold, Apply: apply})
		if err == nil && !(threshold > 0 && threshold < 1) {
			t.Fatalf("rebalance with threshold %g accepted", threshold)
		}
	case 1:
		var rep *DrainReply
		if rep, err = svc.Drain(ctx, &DrainRequest{Name: name}); err == nil {
			checkStates(t, svc.s, name, rep.Namespaces, placement.StateDraining, placement.StateDrained)
		}
	case 2:
		if _, err = svc.Fail(ctx, &FailRequest{Ns: name}); err == nil {
			checkStates(t, svc.s, name, []string{name}, placement.StateFailed)
		}
	}
	if err != nil && !errors.Is(err, meta.ErrInvalid) && !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("request (op %d, %q, %g, %v) refused with %v: neither ErrInvalid nor ErrNotFound", op, name, threshold, apply, err)
	}
	return err == nil
}

// checkStates checks that the namespaces ids, which a request for name
// acted on, are recorded and in one of the states want.
func checkStates(t *testing.T, s *meta.Store, name string, ids []string, want ...placement.State) {
	nss, err := s.Namespaces(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		i := slices.IndexFunc(nss, func(n *meta.NamespaceRecord) bool { return n.ID == id })
		if i < 0 || (nss[i].ID != name && nss[i].Host != name) ||
			!slices.ContainsFunc(want, func(w placement.State) bool { return w.String() == nss[i].State }) {
			t.Fatalf("request for %q acted on namespace %q: %+v, want one of %v", name, id, nss, want)
		}
	}
}

// revision is etcd's current revision.
func revision(t *testing.T, s *meta.Store) int64 {
	v, err := s.At(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return v.Rev()
}
