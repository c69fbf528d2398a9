package volclient

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta"
)

// TestOwnerRunsOlderBuildsMoveTask: a move task as older builds wrote it,
// its parameters as words in Kind, is carried out by the owner like a
// typed one, and the record it leaves is in the typed form (rewritten on
// first touch); the data verifies after the move.
func TestOwnerRunsOlderBuildsMoveTask(t *testing.T) {
	t.Parallel()
	const size = 4 << 20
	tc := newTestCluster(t, 7, 64<<20, 4<<20)
	ctx := context.Background()
	m := tc.openVolume(t, size, 64<<10, testOpenOptions("node1"))
	model := fillVolume(t, m, size)
	vm, err := tc.store.VolumeMap(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	seg, err := vm.Segment(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, sl := range seg.Slots {
		used[sl.NS] = true
	}
	to := ""
	for i := range 7 {
		if ns := fmt.Sprintf("h%d-n1", i); !used[ns] {
			to = ns
		}
	}
	from := seg.Slots[1].NS
	old := &meta.TaskRecord{ID: "mv-v-0", Volume: "v", Holder: "node1", State: meta.TaskRunning,
		Kind: fmt.Sprintf("move drain seg=0 shard=1 from=%s to=%s start=%d", from, to, time.Now().UnixMilli())}
	if err := tc.store.PutTask(ctx, old); err != nil {
		t.Fatal(err)
	}
	s := &taskServer{m: m, store: tc.store, o: TaskOptions{Holder: "node1", ProgressEvery: time.Hour, Logf: t.Logf}, busy: map[int64]bool{}}
	if err := s.poll(ctx); err != nil {
		t.Fatal(err)
	}
	s.wg.Wait()
	got, err := tc.store.Task(ctx, old.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := meta.ShardMove{Kind: "drain", Segment: 0, Shard: 1, From: from, To: to}
	if got.State != meta.TaskDone || got.Kind != meta.TaskMove || got.Move.Kind != want.Kind || got.Move.Shard != 1 ||
		got.Move.From != from || got.Move.To != to || got.Move.Started == 0 {
		t.Fatalf("task after the move %+v, want done in the typed form %+v", got, want)
	}
	if seg, err = vm.Segment(ctx, 0); err != nil || seg.Slots[1].NS != to {
		t.Fatalf("segment 0 after the move: %+v, %v; want shard 1 on %s", seg, err, to)
	}
	verifyVolume(t, m, model)
}
