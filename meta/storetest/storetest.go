// Package storetest gives tests above meta a meta.Store and a cluster in
// it: a store opened on an embedded or an in-memory etcd (meta/metatest
// starts both), closed when the test ends, its cluster initialised, hosts
// with one namespace each and volumes with allocated segments recorded.
// It is not part of metatest
// because meta's own tests import metatest, which therefore cannot import
// meta.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/memetcd"
)

// Open opens a Store with cfg (Endpoints: an etcd such as metatest.Start
// returns), closed when t ends.
func Open(t testing.TB, cfg meta.Config) *meta.Store {
	t.Helper()
	s, err := meta.Open(context.Background(), cfg)
	return closed(t, s, err)
}

// OpenMem opens a Store with cfg over the in-memory etcd (metatest.Mem or
// MemClock), closed when t ends.
func OpenMem(t testing.TB, etcd *memetcd.Server, cfg meta.Config) *meta.Store {
	t.Helper()
	s, err := meta.OpenClient(etcd.Client(), cfg)
	return closed(t, s, err)
}

// closed fails t on err, else closes s when t ends.
func closed(t testing.TB, s *meta.Store, err error) *meta.Store {
	t.Helper()
	if err != nil {
		t.Fatalf("storetest: open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Init initializes the cluster of s with opts and returns its record.
func Init(t testing.TB, s *meta.Store, opts meta.InitOptions) *meta.ClusterRecord {
	t.Helper()
	c, err := s.InitCluster(context.Background(), opts)
	if err != nil {
		t.Fatalf("storetest: init cluster: %v", err)
	}
	return c
}

// AddHost records the host ns.Host with labels and its namespace ns; it
// returns the namespace's record.
func AddHost(t testing.TB, s *meta.Store, labels map[string]string, ns meta.NamespaceSpec) *meta.NamespaceRecord {
	t.Helper()
	ctx := context.Background()
	if _, err := s.AddHost(ctx, ns.Host, labels); err != nil {
		t.Fatalf("storetest: add host %s: %v", ns.Host, err)
	}
	rec, err := s.AddNamespace(ctx, ns)
	if err != nil {
		t.Fatalf("storetest: add namespace %s/%d: %v", ns.Host, ns.NSID, err)
	}
	return rec
}

// AddVolume creates the volume spec and allocates its segments 0 to
// segs-1; it returns the volume's map.
func AddVolume(t testing.TB, s *meta.Store, spec meta.VolumeSpec, segs int64) *meta.VolumeMap {
	t.Helper()
	ctx := context.Background()
	if _, err := s.CreateVolume(ctx, spec); err != nil {
		t.Fatalf("storetest: create volume %s: %v", spec.Name, err)
	}
	vm, err := s.VolumeMap(ctx, spec.Name, nil)
	if err != nil {
		t.Fatalf("storetest: volume %s: %v", spec.Name, err)
	}
	for seg := range segs {
		if _, err := vm.Allocate(ctx, seg); err != nil {
			t.Fatalf("storetest: allocate segment %s/%d: %v", spec.Name, seg, err)
		}
	}
	return vm
}

// Segments reads the segment records of volume vol and the etcd revision
// they were read at.
func Segments(t testing.TB, s *meta.Store, vol string) (map[int64]*meta.SegmentRecord, int64) {
	t.Helper()
	ctx := context.Background()
	vm, err := s.VolumeMap(ctx, vol, nil)
	if err != nil {
		t.Fatalf("storetest: volume %s: %v", vol, err)
	}
	segs, rev, err := vm.Segments(ctx)
	if err != nil {
		t.Fatalf("storetest: segments of %s: %v", vol, err)
	}
	return segs, rev
}

// PlayScrub writes what the owner of volume vol's running scrub writes:
// done of total segments, and the end when done is total. The scrub task
// must be running.
func PlayScrub(t testing.TB, s *meta.Store, vol string, done, total int64) {
	t.Helper()
	ctx := context.Background()
	tk, err := s.Task(ctx, meta.ScrubTaskID(vol))
	if err != nil || tk.State != meta.TaskRunning {
		t.Fatalf("storetest: scrub task %+v %v, want it running", tk, err)
	}
	tk.Done, tk.Total = done, total
	if done == total {
		tk.State, tk.Ended = meta.TaskDone, time.Now().UTC().Format(time.RFC3339)
	}
	if err := s.PutTask(ctx, tk); err != nil {
		t.Fatalf("storetest: scrub task of %s: %v", vol, err)
	}
}
