package meta

import (
	"sync"
	"testing"
)

// TestSnapshotLoadedOnceForConcurrentCallers: callers that find the
// allocation snapshot missing at the same time share one load of the
// cluster instead of each reading all of it; after an invalidation the
// next caller loads it again.
func TestSnapshotLoadedOnceForConcurrentCallers(t *testing.T) {
	s := setup(t, 6, 4, 8)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 32 {
		wg.Go(func() {
			<-start
			if err := s.withSnapshot(ctx, func(sn *snapshot) error {
				if len(sn.ids) != 24 {
					t.Errorf("snapshot has %d namespaces, want 24", len(sn.ids))
				}
				return nil
			}); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if s.snapLoads != 1 {
		t.Errorf("32 concurrent callers loaded the snapshot %d times, want once", s.snapLoads)
	}
	s.invalidate()
	if err := s.withSnapshot(ctx, func(*snapshot) error { return nil }); err != nil || s.snapLoads != 2 {
		t.Errorf("after an invalidation: %v, %d loads in all, want 2", err, s.snapLoads)
	}
}

// TestSnapshotClusterFollowsAllocations: the placement view the snapshot
// keeps between loads counts every slot this store allocated or freed,
// exactly as a view built afresh from the snapshot's records.
func TestSnapshotClusterFollowsAllocations(t *testing.T) {
	s := setup(t, 6, 2, 8)
	ctx := testCtx(t)
	vm := addVolume(t, s, "v", 4, 2, 8)
	for seg := range int64(6) {
		if _, err := vm.Allocate(ctx, seg); err != nil {
			t.Fatal(err)
		}
	}
	if err := vm.Free(ctx, 2); err != nil {
		t.Fatal(err)
	}
	err := s.withSnapshot(ctx, func(sn *snapshot) error {
		kept, err := sn.cluster()
		if err != nil {
			return err
		}
		fresh, err := sn.build()
		if err != nil {
			return err
		}
		var used int64
		for i, n := range kept.Namespaces() {
			if f := fresh.Namespaces()[i]; n != f {
				t.Errorf("kept view %+v, built afresh %+v", n, f)
			}
			used += n.Used
		}
		if used != 5*6 {
			t.Errorf("%d slots used in the kept view, want 30 (5 segments of 4+2)", used)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
