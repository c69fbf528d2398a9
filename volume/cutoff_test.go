package volume

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
)

// TestRecoverCutOffMarksNothing: the owner of a 4+2 volume crashes in the
// middle of writes; one namespace is lost, and the next owner (the
// controller, say) is cut off from two more, which everyone else still
// reaches. Its Recover cannot settle a stripe with three shards missing
// and must fail without recording anything: had it marked the two
// namespaces it cannot reach stale (as a parity slot that missed a
// stripe's settling), every segment would keep three stale slots for
// good. The owner after it, which reaches them again, recovers the volume,
// and every block reads its old value or one written since.
func TestRecoverCutOffMarksNothing(t *testing.T) {
	ctx := context.Background()
	g := pplLayouts[1]
	for seed := int64(1); seed <= 3; seed++ {
		h := crashWithLost(t, g, 2, seed)
		r := h.r

		cutOff := maps.Clone(h.devs)
		for _, name := range r.names[:2] {
			fd := faultdev.New(h.devs[name], seed)
			fd.SetDown(true)
			cutOff[name] = fd
		}
		r.reopen(t, cutOff)
		if _, err := r.vol.Recover(ctx); !errorsIsUnavailable(err) {
			t.Fatalf("seed %d: recover by an owner that reaches 3 of 6 namespaces: got %v, want a failure of class ErrUnavailable", seed, err)
		}
		marks, err := r.stale.Stale(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range marks {
			if m.Ref.NS == r.names[0] || m.Ref.NS == r.names[1] {
				t.Fatalf("seed %d: the cut-off owner marked segment %d slot %d on %s stale; it only failed to reach it", seed, m.Segment, m.Slot, m.Ref.NS)
			}
		}

		r.reopen(t, h.devs)
		if _, err := r.vol.Recover(ctx); err != nil {
			t.Fatalf("seed %d: recover by an owner that reaches all but the lost namespace: %v", seed, err)
		}
		h.check(t)
	}
}

func errorsIsUnavailable(err error) bool {
	return err != nil && blockdev.Class(err) == blockdev.ErrUnavailable
}

// TestDeferredSegmentMismatchesUnsettled: Recover defers a segment (two
// data shards of a stripe written at the crash are stale, so it cannot be
// settled). A block left bad there says nothing of the namespace's media
// (the crash may have torn it): the read fails as corrupt, and the
// Checksum event counts the block Unsettled, which the agent never reports
// as a media error. The same mismatches in a segment Recover settled are
// plain unhealed blocks.
// deferSegmentZero writes two segments of a 4+2 volume and flushes,
// rewrites stripe 0 without a flush and crashes; two data slots of segment
// 0 are marked stale. The next owner (events ev) recovers: segment 1 is
// resynced, segment 0 deferred (stripe 0 has a record and two data shards
// missing).
func deferSegmentZero(t *testing.T, ev EventListener) *rig {
	ctx := context.Background()
	g := pplLayouts[1]
	r := newRig(t, g, 2*g.SegmentData(), rigOptions{crashable: true})
	a, b := testutil.Pattern(int(2*g.SegmentData()), 1), testutil.Pattern(int(g.StripeData()), 2)
	mustWriteFlushed(t, r.vol, a, 0)
	if err := r.vol.WriteAt(ctx, b, 0); err != nil { // segment 0 stripe 0, not flushed
		t.Fatal(err)
	}
	if err := r.vol.storeSums(ctx, nil); err != nil {
		t.Fatal(err)
	}
	crashed := r.crash(t, ctx, func(int) bool { return true })
	refs, _, _ := r.alloc.Lookup(ctx, 0)
	for _, sh := range []int{2, 3} {
		i := g.SlotOf(0, sh)
		if err := r.stale.MarkStale(ctx, StaleSlot{Segment: 0, Slot: i, Ref: refs[i]}); err != nil {
			t.Fatal(err)
		}
	}
	r.epoch++
	v, err := New(Options{Geometry: g, Size: r.vol.Size(), Devices: crashed, Alloc: r.alloc, Dirty: r.dirty, Stale: r.stale, LogEpoch: r.epoch, Events: ev})
	if err != nil {
		t.Fatal(err)
	}
	r.vol = v
	r.rebindMems(crashed)
	if _, err := v.Recover(ctx); err != nil {
		t.Fatalf("recover: %v", err)
	}
	if !v.resyncPending(0) || v.resyncPending(1) {
		t.Fatalf("resync pending: segment 0 %v, segment 1 %v; want segment 0 only", v.resyncPending(0), v.resyncPending(1))
	}
	return r
}

// TestCleanKeepsDeferredSegment: the owner writes to a segment whose
// resync Recover deferred, and to another, then goes idle: Clean marks the
// other clean, but the deferred one stays dirty, so that the next owner's
// Recover settles its stripes (marked clean, their torn blocks would stay
// torn for good).
func TestCleanKeepsDeferredSegment(t *testing.T) {
	ctx := context.Background()
	r := deferSegmentZero(t, EventListener{})
	g := r.g
	for _, off := range []int64{g.StripeData() + 4096, g.SegmentData() + 4096} {
		if err := r.vol.WriteAt(ctx, testutil.Pattern(4096, 7), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.vol.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	dirty, err := r.dirty.Dirty(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dirty, []int64{0}) {
		t.Fatalf("dirty segments after Clean: %v, want [0] (its resync is pending)", dirty)
	}
}

func TestDeferredSegmentMismatchesUnsettled(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var events []ChecksumInfo
	ev := EventListener{Checksum: func(c ChecksumInfo) {
		mu.Lock()
		events = append(events, c)
		mu.Unlock()
	}}
	r := deferSegmentZero(t, ev)
	g, v := r.g, r.vol
	// Row 0 of stripe 1: one bad block with the two stale shards is more
	// than the parity heals. Segment 1: three bad blocks of a row.
	flipBitT(t, r, flipKey{seg: 0, stripe: 1, shard: 0, row: 0}, 3)
	for sh := range 3 {
		flipBitT(t, r, flipKey{seg: 1, stripe: 1, shard: sh, row: 0}, 3)
	}
	got := make([]byte, 4096)
	for _, off := range []int64{g.StripeData(), g.SegmentData() + g.StripeData()} {
		mu.Lock()
		events = nil
		mu.Unlock()
		err := v.ReadAt(ctx, got, off)
		if !errors.Is(err, blockdev.ErrCorrupt) {
			t.Fatalf("read at %d: %v, want class ErrCorrupt", off, err)
		}
		deferred := off < g.SegmentData()
		mu.Lock()
		if len(events) == 0 {
			t.Fatalf("read at %d: no checksum event", off)
		}
		for _, c := range events {
			unhealed := c.Blocks - c.Healed - c.Torn
			if want := map[bool]int{true: unhealed, false: 0}[deferred]; c.Unsettled != want {
				t.Fatalf("segment %d (resync deferred: %v): event %+v counts %d blocks unsettled, want %d", c.Segment, deferred, c, c.Unsettled, want)
			}
		}
		mu.Unlock()
	}
}

// TestRecoverCutOffFromOne: the next owner after a crash is cut off from
// one namespace and another is lost: every stripe can be settled, and the
// stripes it settles without the unreachable namespace are recorded as
// missed there by stripe, not the whole slot. The owner after it, which
// reaches that namespace again, still has it for every other stripe: it
// recovers with the lost namespace still gone, and every block reads its
// old value or one written since (a whole-slot mark would leave two data
// shards missing in stripes written at the crash, read as corrupt).
func TestRecoverCutOffFromOne(t *testing.T) {
	ctx := context.Background()
	g := pplLayouts[1]
	for seed := int64(1); seed <= 3; seed++ {
		h := crashWithLost(t, g, 2, seed)
		r := h.r

		cutOff := maps.Clone(h.devs)
		away := faultdev.New(h.devs[r.names[0]], seed)
		away.SetDown(true)
		cutOff[r.names[0]] = away
		r.reopen(t, cutOff)
		if _, err := r.vol.Recover(ctx); err != nil {
			t.Fatalf("seed %d: recover by an owner that reaches 4 of 6 namespaces: %v", seed, err)
		}
		marks, err := r.stale.Stale(ctx)
		if err != nil {
			t.Fatal(err)
		}
		holes := 0
		for _, m := range marks {
			if m.Ref.NS != r.names[0] {
				continue
			}
			if m.Stripes == nil {
				t.Fatalf("seed %d: segment %d slot %d on %s, which the owner only could not reach, marked stale as a whole", seed, m.Segment, m.Slot, m.Ref.NS)
			}
			holes += len(m.Stripes)
		}
		if holes == 0 {
			t.Fatalf("seed %d: no stripe recorded missed on %s; the recovery settled stripes without it", seed, r.names[0])
		}

		r.reopen(t, h.devs)
		if _, err := r.vol.Recover(ctx); err != nil {
			t.Fatalf("seed %d: recover by an owner that reaches all but the lost namespace: %v", seed, err)
		}
		h.check(t)
		if _, err := r.vol.Repair(ctx); err != nil {
			t.Fatalf("seed %d: repair: %v", seed, err)
		}
		h.check(t)
	}
}
