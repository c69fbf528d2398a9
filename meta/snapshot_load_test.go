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
