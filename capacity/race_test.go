package capacity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
)

// smallCluster initializes the cluster of s as TestCreateAndResizeVolume
// and the race tests have it: 3 namespaces of 10 slots of 1 MiB, 30 MiB
// usable by 2+1, 40 MiB of 2+1 volumes within the default limit of 2.
func smallCluster(t *testing.T, s *meta.Store) {
	t.Helper()
	initCluster(t, s, "", host{size: 11 << 20}, host{size: 11 << 20}, host{size: 11 << 20})
}

// host is one host of a test cluster and its one namespace.
type host struct {
	labels   map[string]string
	size     int64 // the namespace's
	unfenced bool  // the namespace needs no fencing
}

// initCluster initializes the cluster of s with 1 MiB slots and domain
// label domain (none when empty), and adds hosts h0, h1, ... with one
// namespace each.
func initCluster(t *testing.T, s *meta.Store, domain string, hosts ...host) {
	t.Helper()
	storetest.Init(t, s, meta.InitOptions{SlotSize: 1 << 20, DomainLabel: domain})
	for i, hs := range hosts {
		h := fmt.Sprintf("h%d", i)
		storetest.AddHost(t, s, hs.labels, meta.NamespaceSpec{Host: h, NQN: "nqn.test:" + h, NSID: 1, Size: hs.size,
			Unfenced: hs.unfenced, Paths: []meta.PathRecord{{Addr: "tcp://127.0.0.1:4420"}}})
	}
}

// opener opens a Store of its own (a process of its own: nothing cached
// is shared) on cluster name of one etcd.
type opener func(t *testing.T, name string) *meta.Store

// etcds are the stores the race tests run on: an embedded etcd and the
// in-memory one, which must hold the limit alike.
var etcds = []struct {
	name  string
	start func(t *testing.T) opener
}{
	{"etcd", func(t *testing.T) opener {
		eps := metatest.Start(t)
		return func(t *testing.T, name string) *meta.Store {
			return storetest.Open(t, meta.Config{Endpoints: eps, Cluster: name})
		}
	}},
	{"mem", func(t *testing.T) opener {
		srv := metatest.Mem(t)
		return func(t *testing.T, name string) *meta.Store {
			return storetest.OpenMem(t, srv, meta.Config{Cluster: name})
		}
	}},
}

// memStore opens cluster name on an in-memory etcd of its own.
func memStore(t *testing.T, name string) *meta.Store {
	t.Helper()
	return storetest.OpenMem(t, metatest.Mem(t), meta.Config{Cluster: name})
}

func spec21(name string, size int64) meta.VolumeSpec {
	return meta.VolumeSpec{Name: name, Size: size, Layout: meta.Layout{K: 2, M: 1, Chunk: 64 << 10}}
}

// together runs the fns at once, each on a store of its own, and returns
// their errors.
func together(t *testing.T, etcd opener, name string, fns ...func(*meta.Store) error) []error {
	stores := make([]*meta.Store, len(fns))
	for i := range fns {
		stores[i] = etcd(t, name)
		if _, err := stores[i].Cluster(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, len(fns))
	var start, wg sync.WaitGroup
	start.Add(1)
	for i, fn := range fns {
		wg.Go(func() {
			start.Wait()
			errs[i] = fn(stores[i])
		})
	}
	start.Done()
	wg.Wait()
	return errs
}

// TestConcurrentCreatesHoldTheLimit: 8 creates of 8 MiB at once, each
// within the limit alone; 5 fit together (5*12 MiB promised after parity is
// 2 times the 30 MiB usable). Exactly 5 are created, the other 3 are
// refused as overcommitted, and what is recorded is within the limit.
func TestConcurrentCreatesHoldTheLimit(t *testing.T) {
	for _, e := range etcds {
		t.Run(e.name, func(t *testing.T) { concurrentCreates(t, e.start(t)) })
	}
}

func concurrentCreates(t *testing.T, etcd opener) {
	ctx := context.Background()
	smallCluster(t, etcd(t, "race"))
	var fns []func(*meta.Store) error
	for i := range 8 {
		fns = append(fns, func(s *meta.Store) error {
			_, _, err := CreateVolume(ctx, s, spec21(fmt.Sprintf("v%d", i), 8<<20))
			return err
		})
	}
	created := 0
	for i, err := range together(t, etcd, "race", fns...) {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, ErrOvercommitted):
			t.Errorf("create v%d: %v, want success or ErrOvercommitted", i, err)
		}
	}
	r, err := Of(ctx, etcd(t, "race"))
	if err != nil {
		t.Fatal(err)
	}
	if created != 5 || r.Overcommit > 2 {
		t.Fatalf("%d of 8 volumes created, overcommit %.2f: want 5 and at most the limit of 2", created, r.Overcommit)
	}
}

// TestConcurrentCreateAndResizeHoldTheLimit: with volume a of 16 MiB (24
// MiB promised), growing a to 32 MiB and creating b of 16 MiB each fit
// alone (48 of 60 MiB) but not together (72). In each of several rounds
// exactly one succeeds and the other is refused as overcommitted, leaving
// nothing of it behind.
func TestConcurrentCreateAndResizeHoldTheLimit(t *testing.T) {
	for _, e := range etcds {
		t.Run(e.name, func(t *testing.T) { concurrentCreateAndResize(t, e.start(t)) })
	}
}

func concurrentCreateAndResize(t *testing.T, etcd opener) {
	ctx := context.Background()
	for round := range 4 {
		name := fmt.Sprintf("race%d", round)
		smallCluster(t, etcd(t, name))
		if _, _, err := CreateVolume(ctx, etcd(t, name), spec21("a", 16<<20)); err != nil {
			t.Fatal(err)
		}
		errs := together(t, etcd, name,
			func(s *meta.Store) error { _, _, err := ResizeVolume(ctx, s, "a", 32<<20); return err },
			func(s *meta.Store) error { _, _, err := CreateVolume(ctx, s, spec21("b", 16<<20)); return err })
		resized, created := errs[0] == nil, errs[1] == nil
		for _, err := range errs {
			if err != nil && !errors.Is(err, ErrOvercommitted) {
				t.Fatalf("round %d: %v, want success or ErrOvercommitted", round, err)
			}
		}
		if resized == created {
			t.Fatalf("round %d: resize %v, create %v: want exactly one to succeed", round, errs[0], errs[1])
		}
		s := etcd(t, name)
		a, err := s.Volume(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Volume(ctx, "b")
		if (a.Size == 32<<20) != resized || (err == nil) != created {
			t.Fatalf("round %d: a is %d bytes, b: %v; resized %v, created %v", round, a.Size, err, resized, created)
		}
	}
}
