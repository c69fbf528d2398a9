package pool

import (
	"context"
	"slices"
	"testing"

	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
)

// waitFor is testutil.WaitFor under this package's old name.
var waitFor = testutil.WaitFor

// testLogf is testutil.Logf under this package's old name.
var testLogf = testutil.Logf

func store(t *testing.T) *meta.Store {
	t.Helper()
	return storetest.OpenMem(t, metatest.Mem(t), meta.Config{Cluster: "pool"})
}

func start(t *testing.T, host string, join []string, s *meta.Store) *Member {
	t.Helper()
	cfg := Config{Health: health.Config{Meta: health.Meta{Role: health.RoleTarget, Host: host}, Profile: health.ProfileTest},
		Join: join, Logf: testLogf(t)}
	if s != nil {
		cfg.Store = func(context.Context) (*meta.Store, error) { return s, nil }
	}
	m, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func seedNames(t *testing.T, s *meta.Store) []string {
	recs, err := s.GossipSeeds(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range recs {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	return names
}

// TestJoinThroughEtcd: the first member registers itself, the second finds
// it through etcd and joins, and a member that leaves removes its record
// and is seen gone by the other.
func TestJoinThroughEtcd(t *testing.T) {
	s := store(t)
	a := start(t, "h1", nil, s)
	defer a.Leave()
	waitFor(t, "h1 registered", func() bool { return slices.Equal(seedNames(t, s), []string{"h1"}) })
	if n := len(a.Node().Members()); n != 1 {
		t.Fatalf("alone, h1 sees %d members", n)
	}
	b := start(t, "h2", nil, s)
	waitFor(t, "h2 joins h1", func() bool { return len(a.Node().Members()) == 2 && len(b.Node().Members()) == 2 })
	waitFor(t, "both registered", func() bool { return slices.Equal(seedNames(t, s), []string{"h1", "h2"}) })
	b.Leave()
	if got := seedNames(t, s); !slices.Equal(got, []string{"h1"}) {
		t.Errorf("after h2 left, seeds %v", got)
	}
	waitFor(t, "h1 sees h2 gone", func() bool { return len(a.Node().Members()) == 1 })
}

// TestJoinGivenSeeds: with Join and no store, a member joins the seeds and
// registers nothing.
func TestJoinGivenSeeds(t *testing.T) {
	s := store(t)
	a := start(t, "h1", nil, s)
	defer a.Leave()
	b := start(t, "h2", []string{a.Addr()}, nil)
	defer b.Leave()
	waitFor(t, "h2 joins h1", func() bool { return len(a.Node().Members()) == 2 })
	waitFor(t, "h1 registered", func() bool { return len(seedNames(t, s)) > 0 })
	if got := seedNames(t, s); !slices.Equal(got, []string{"h1"}) {
		t.Errorf("seeds %v: only h1 has a store", got)
	}
}

// TestRejoinWhenAlone: a member alone keeps looking for seeds, so it joins
// a pool whose seed record appears after it started.
func TestRejoinWhenAlone(t *testing.T) {
	s := store(t)
	b := start(t, "h2", nil, s)
	defer b.Leave()
	a := start(t, "h1", nil, nil) // no seeds, no record: joins no one
	defer a.Leave()
	waitFor(t, "h2 registered", func() bool { return slices.Equal(seedNames(t, s), []string{"h2"}) })
	if n := len(b.Node().Members()); n != 1 {
		t.Fatalf("h2 sees %d members before h1 is registered", n)
	}
	reg, err := s.RegisterGossip(context.Background(), meta.GossipRecord{Name: "h1", Role: "target", Host: "h1", Addr: a.Addr()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())
	waitFor(t, "h2 joins h1 through the new record", func() bool { return len(b.Node().Members()) == 2 })
}
