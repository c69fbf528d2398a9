package volume

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// moveUnderLoad moves slot idx of segment 0 to a slot on the spare namespace
// while writers run, then checks data, parity and the committed placement.
func moveUnderLoad(t *testing.T, r *rig, idx int, before func()) {
	ctx := context.Background()
	size := r.vol.Size()
	model := testutil.Pattern(int(size), 1)
	if err := r.vol.WriteAt(ctx, model, 0); err != nil {
		t.Fatal(err)
	}
	before()
	old, _, _ := r.alloc.Lookup(ctx, 0)
	spare := r.names[len(r.names)-1]
	to := SlotRef{NS: spare, Slot: 0}
	if err := r.alloc.Reserve(to); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex       // guards model
	var writes atomic.Int64 // writes done, to interleave them with the move
	var failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				off := int64((w*7919+i*4099)%int(size/4096)) * 4096
				data := testutil.Pattern(4096, byte(w*50+i))
				mu.Lock()
				err := r.vol.WriteAt(ctx, data, off)
				copy(model[off:], data)
				mu.Unlock()
				writes.Add(1)
				if err != nil {
					failed.Add(1)
					t.Error(err)
					return
				}
			}
		}()
	}
	var last atomic.Int64
	err := r.vol.MoveSlot(ctx, 0, idx, to, MoveOptions{
		Commit:   func(ctx context.Context) error { return r.alloc.Replace(ctx, 0, idx, to) },
		Progress: func(done, total int64) { last.Store(done) },
		// Let a few writes land between stripes, so that writes hit stripes
		// both below and above the move's mark.
		Pace: func(ctx context.Context, n int64) error {
			for target := writes.Load() + 3; writes.Load() < target && failed.Load() == 0; {
				runtime.Gosched()
			}
			return nil
		},
	})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	r.alloc.Release(old[idx])
	if last.Load() != r.g.StripesPerSegment() {
		t.Errorf("progress ended at %d of %d", last.Load(), r.g.StripesPerSegment())
	}
	now, _, _ := r.alloc.Lookup(ctx, 0)
	if now[idx] != to {
		t.Fatalf("placement slot %d = %v, want %v", idx, now[idx], to)
	}
	mustEqual(t, "after move", mustRead(t, r.vol, 0, int(size)), model)
	r.checkParity(t)
	// The moved shard is a full member: lose two other shards and read.
	r.devs[(idx+1)%r.g.N()].SetDown(true)
	r.devs[(idx+2)%r.g.N()].SetDown(true)
	mustEqual(t, "after move, two others down", mustRead(t, r.vol, 0, int(size)), model)
}

func TestMoveSlotRebalance(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 256 << 10}
	r := newRig(t, g, g.SegmentData(), rigOptions{namespaces: 7, slots: 2})
	moveUnderLoad(t, r, 2, func() {})
}

func TestMoveSlotRebuild(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 256 << 10}
	r := newRig(t, g, g.SegmentData(), rigOptions{namespaces: 7, slots: 2})
	moveUnderLoad(t, r, 3, func() {
		ctx := context.Background()
		old, _, _ := r.alloc.Lookup(ctx, 0)
		r.devs[r.index(old[3].NS)].SetDown(true) // the shard to rebuild is gone
	})
}

// TestMoveSlotCarriesChecksums rebuilds a lost shard of a checksummed
// volume elsewhere, then opens the volume anew (no cached checksums) over
// the namespaces that now hold it and reads and scrubs everything: the
// destination's checksum area must have come with the move, in format 4
// bound to the slot's place, which is the same on the new namespace.
func TestMoveSlotCarriesChecksums(t *testing.T) {
	for _, g := range []layout.Geometry{
		{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 256 << 10, Checksums: true},
		{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 256 << 10, Checksums: true, Seed: 9},
	} {
		t.Run(g.String(), func(t *testing.T) { moveCarriesChecksums(t, g) })
	}
}

func moveCarriesChecksums(t *testing.T, g layout.Geometry) {
	ctx := context.Background()
	r := newRig(t, g, g.SegmentData(), rigOptions{namespaces: 7, slots: 2, crashable: true})
	want := testutil.Pattern(int(r.vol.Size()), 4)
	if err := r.vol.WriteAt(ctx, want, 0); err != nil {
		t.Fatal(err)
	}
	old, _, _ := r.alloc.Lookup(ctx, 0)
	r.devs[r.index(old[3].NS)].SetDown(true) // the shard to rebuild is gone
	to := SlotRef{NS: r.names[6], Slot: 0}
	if err := r.alloc.Reserve(to); err != nil {
		t.Fatal(err)
	}
	err := r.vol.MoveSlot(ctx, 0, 3, to, MoveOptions{Commit: func(ctx context.Context) error { return r.alloc.Replace(ctx, 0, 3, to) }})
	if err != nil {
		t.Fatal(err)
	}
	restart(t, r)
	if _, err := r.vol.Scrub(ctx, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "after the move and a restart", mustRead(t, r.vol, 0, len(want)), want)
	if st := r.vol.ChecksumStats(); st != (ChecksumStats{}) {
		t.Fatalf("after the move: %+v, want no mismatch", st)
	}
}

func TestMoveSlotAbortKeepsOldPlacement(t *testing.T) {
	g := layout.Geometry{K: 2, M: 1, Chunk: 4 << 10, SlotSize: 64 << 10}
	r := newRig(t, g, g.SegmentData(), rigOptions{namespaces: 4, slots: 1})
	ctx := context.Background()
	data := testutil.Pattern(int(r.vol.Size()), 3)
	if err := r.vol.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("commit refused")
	err := r.vol.MoveSlot(ctx, 0, 1, SlotRef{NS: r.names[3], Slot: 0}, MoveOptions{
		Commit: func(context.Context) error { return boom },
	})
	if !errors.Is(err, ErrMoveAborted) || !errors.Is(err, boom) {
		t.Fatalf("MoveSlot = %v, want ErrMoveAborted wrapping the commit error", err)
	}
	// Writes after the abort must reach the old slot only.
	patch := testutil.Pattern(8192, 9)
	if err := r.vol.WriteAt(ctx, patch, 0); err != nil {
		t.Fatal(err)
	}
	copy(data, patch)
	r.devs[3].SetDown(true) // the abandoned destination must not matter
	mustEqual(t, "after abort", mustRead(t, r.vol, 0, len(data)), data)
	r.checkParity(t)
	if err := r.vol.MoveSlot(ctx, 0, 9, SlotRef{}, MoveOptions{Commit: func(context.Context) error { return nil }}); err == nil {
		t.Error("MoveSlot accepted slot index 9")
	}
}
