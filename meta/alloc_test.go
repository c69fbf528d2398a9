package meta

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"

	"github.com/nvstripe/nvstripe/placement"
)

func nopLogger() *zap.Logger { return zap.NewNop() }

// checkAllocations verifies the allocation invariant over the whole
// cluster: every slot named by a segment (or an in-flight move) is set in
// its namespace's bitmap, no slot is named twice, and no set bit is
// unnamed (leaked). It returns the number of slots in use.
func checkAllocations(t *testing.T, s *Store) int {
	t.Helper()
	ctx := testCtx(t)
	owner := map[SlotRef]string{}
	vols, err := s.Volumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(r SlotRef, who string) {
		if prev, dup := owner[r]; dup {
			t.Fatalf("slot %s/%d handed out twice: %s and %s", r.NS, r.Slot, prev, who)
		}
		owner[r] = who
	}
	for _, v := range vols {
		vm, err := s.VolumeMap(ctx, v.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		segs, _, err := vm.Segments(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, rec := range segs {
			for shard, r := range rec.Slots {
				claim(r, fmt.Sprintf("%s/%d shard %d", v.Name, i, shard))
			}
			if mv := rec.Move; mv != nil {
				extra := mv.To
				if mv.Committed() {
					extra = *mv.From
				}
				claim(extra, fmt.Sprintf("%s/%d move", v.Name, i))
			}
		}
	}
	nss, err := s.Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	used := 0
	for _, n := range nss {
		a, err := s.Allocation(ctx, n.ID)
		if err != nil {
			t.Fatal(err)
		}
		for slot := int64(1); slot < a.Slots; slot++ {
			_, named := owner[SlotRef{NS: n.ID, Slot: slot}]
			if a.isSet(slot) != named {
				t.Fatalf("%s slot %d: set in bitmap %v, named by a segment %v (leak or lost reservation)", n.ID, slot, a.isSet(slot), named)
			}
		}
		used += int(a.Used)
	}
	if used != len(owner) {
		t.Fatalf("bitmaps count %d used slots, segments name %d", used, len(owner))
	}
	return used
}

// TestConcurrentAllocateNearlyFull: 8 goroutines, two per volume from
// opposite ends, allocate more than the cluster holds. Every slot is handed
// out once, none leaks, and the winners are exactly the recorded segments.
func TestConcurrentAllocateNearlyFull(t *testing.T) {
	s := setup(t, 6, 2, 10)  // 120 usable slots
	const vols, segs = 4, 12 // 4 x 12 segments of 3 shards want 144 slots
	var maps []*VolumeMap
	for v := range vols {
		maps = append(maps, addVolume(t, s, fmt.Sprintf("v%d", v), 2, 1, segs))
	}
	var ok, full atomic.Int64
	got := make([]sync.Map, vols) // segment -> slots, as returned
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := testCtx(t)
			for k := range int64(segs) {
				seg := k
				if g >= vols {
					seg = segs - 1 - k
				}
				slots, err := maps[g%vols].Allocate(ctx, seg)
				switch {
				case errors.Is(err, placement.ErrNoSpace):
					full.Add(1)
				case err != nil:
					t.Errorf("goroutine %d segment %d: %v", g, seg, err)
				default:
					ok.Add(1)
					if prev, loaded := got[g%vols].LoadOrStore(seg, slots); loaded && !slices.Equal(prev.([]SlotRef), slots) {
						t.Errorf("segment %d allocated twice differently: %v and %v", seg, prev, slots)
					}
				}
			}
		}()
	}
	wg.Wait()
	used := checkAllocations(t, s)
	recorded := 0
	for v := range vols {
		all, _, err := maps[v].Segments(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		recorded += len(all)
		got[v].Range(func(k, val any) bool {
			if rec := all[k.(int64)]; rec == nil || !slices.Equal(rec.Slots, val.([]SlotRef)) {
				t.Errorf("v%d segment %d: returned %v, recorded %v", v, k, val, rec)
			}
			return true
		})
	}
	t.Logf("allocations: %d ok (incl. idempotent repeats), %d refused full; %d segments, %d of 120 slots used", ok.Load(), full.Load(), recorded, used)
	if used != recorded*3 || recorded < 36 || full.Load() == 0 {
		t.Fatalf("%d slots for %d segments; want 3 each, at least 36 segments, and some refusals", used, recorded)
	}
	// Free everything concurrently: nothing may remain.
	for v := range vols {
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for seg := int64(g); seg < segs; seg++ {
					if err := maps[v].Free(testCtx(t), seg); err != nil {
						t.Errorf("free v%d/%d: %v", v, seg, err)
					}
				}
			}()
		}
	}
	wg.Wait()
	if used := checkAllocations(t, s); used != 0 {
		t.Fatalf("%d slots still used after freeing everything", used)
	}
}

func TestAllocateLookupIdempotent(t *testing.T) {
	s := setup(t, 4, 1, 8)
	vm := addVolume(t, s, "vol", 3, 1, 4)
	ctx := testCtx(t)
	if _, ok, err := vm.Lookup(ctx, 2); ok || err != nil {
		t.Fatalf("lookup of unallocated segment: ok=%v err=%v", ok, err)
	}
	a, err := vm.Allocate(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := vm.Allocate(ctx, 2)
	if err != nil || !slices.Equal(a, b) {
		t.Fatalf("second allocate: %v %v, first %v", b, err, a)
	}
	c, ok, err := vm.Lookup(ctx, 2)
	if !ok || err != nil || !slices.Equal(a, c) {
		t.Fatalf("lookup: %v %v %v", c, ok, err)
	}
	hosts := map[string]bool{}
	for _, r := range a {
		n, _ := s.Namespace(ctx, r.NS)
		hosts[n.Host] = true
	}
	if len(hosts) != 4 {
		t.Errorf("4 shards on %d hosts: %v", len(hosts), a)
	}
	if _, err := vm.Allocate(ctx, 4); !errors.Is(err, ErrInvalid) {
		t.Errorf("segment past the end: %v", err)
	}
	if err := vm.Free(ctx, 3); err != nil {
		t.Errorf("free of an unallocated segment: %v", err)
	}
	checkAllocations(t, s)
}

// TestAllocateSkipsNamespacesOutOfService: a namespace marked out by
// another client is never allocated, even from a stale snapshot.
func TestAllocateSkipsNamespacesOutOfService(t *testing.T) {
	s := setup(t, 4, 1, 8)
	vm := addVolume(t, s, "vol", 2, 1, 8)
	ctx := testCtx(t)
	if _, err := vm.Allocate(ctx, 0); err != nil { // loads the snapshot
		t.Fatal(err)
	}
	other := shared.open(t, s.cfg.Cluster)
	if err := other.SetNamespaceState(ctx, "h2-n1", placement.StateOut); err != nil {
		t.Fatal(err)
	}
	for seg := int64(1); seg < 8; seg++ {
		slots, err := vm.Allocate(ctx, seg)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range slots {
			if r.NS == "h2-n1" {
				t.Fatalf("segment %d placed on out namespace: %v", seg, slots)
			}
		}
	}
}

func TestDirtyLog(t *testing.T) {
	s := setup(t, 3, 1, 8)
	vm := addVolume(t, s, "vol", 2, 1, 20)
	ctx := testCtx(t)
	for _, seg := range []int64{7, 3, 11, 3} {
		if err := vm.MarkDirty(ctx, seg); err != nil {
			t.Fatal(err)
		}
	}
	got, err := vm.Dirty(ctx)
	if err != nil || !slices.Equal(got, []int64{3, 7, 11}) {
		t.Fatalf("dirty: %v %v", got, err)
	}
	if err := vm.MarkClean(ctx, []int64{3, 11, 5}); err != nil {
		t.Fatal(err)
	}
	if got, _ := vm.Dirty(ctx); !slices.Equal(got, []int64{7}) {
		t.Fatalf("dirty after clean: %v", got)
	}
	allocateFree(t, ctx, vm, 7)
	if got, _ := vm.Dirty(ctx); len(got) != 0 {
		t.Fatalf("free kept the dirty mark: %v", got)
	}
	if err := vm.MarkDirty(ctx, 20); !errors.Is(err, ErrInvalid) {
		t.Errorf("mark dirty past the end: %v", err)
	}
}

func TestMoves(t *testing.T) {
	s := setup(t, 4, 1, 4)
	vm := addVolume(t, s, "vol", 2, 1, 4)
	ctx := testCtx(t)
	before, err := vm.Allocate(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	to, err := vm.BeginMove(ctx, 0, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range before {
		if r.NS == to.NS {
			t.Fatalf("move target %v is already in the segment %v", to, before)
		}
	}
	checkAllocations(t, s) // source and target both reserved
	if _, err := vm.BeginMove(ctx, 0, 0, ""); !errors.Is(err, ErrBusy) {
		t.Fatalf("second move while one is in flight: %v", err)
	}
	if err := vm.CommitMove(ctx, 0); err != nil {
		t.Fatal(err)
	}
	rec, _ := vm.Segment(ctx, 0)
	if rec.Slots[1] != to || rec.Ver != 2 || *rec.Move.From != before[1] {
		t.Fatalf("after commit: %+v", rec)
	}
	checkAllocations(t, s)
	if err := vm.AbortMove(ctx, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("abort after commit: %v", err)
	}
	if err := vm.FinishMove(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Allocation(ctx, before[1].NS); a.isSet(before[1].Slot) {
		t.Fatalf("old slot %v still reserved after finish", before[1])
	}
	// Abort: the reserved target is released, the placement unchanged.
	to2, err := vm.BeginMove(ctx, 0, 2, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.AbortMove(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Allocation(ctx, to2.NS); a.isSet(to2.Slot) {
		t.Fatalf("aborted target %v still reserved", to2)
	}
	if used := checkAllocations(t, s); used != 3 {
		t.Fatalf("%d slots used, want 3", used)
	}
}
