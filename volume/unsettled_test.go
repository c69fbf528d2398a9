package volume

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// unsettledLayout is a format 4 geometry (checksums bound to their place,
// write log) of the unsettled-row tests.
var unsettledLayout = layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 512 << 10, Checksums: true, Log: true, Seed: 0x5e771e}

// unsettledHole returns a volume recovered after a crash mid-write and the
// loss of a namespace that left unsettled blocks, on a rig with a spare
// namespace (the last) to move the lost slots to.
func unsettledHole(t *testing.T, g layout.Geometry) *hole {
	return unsettledHoleOn(t, g, func(d DeviceMap) DeviceMap { return d })
}

// unsettledHoleOn is unsettledHole with the devices after the crash passed
// through wrap (h.devs holds what it returns).
func unsettledHoleOn(t *testing.T, g layout.Geometry, wrap func(DeviceMap) DeviceMap) *hole {
	for seed := int64(1); seed <= 20; seed++ {
		for lost := 0; lost < g.N(); lost++ {
			h := crashWithLostOn(t, g, lost, seed, rigOptions{crashable: true, namespaces: g.N() + 1, slots: 8})
			h.devs = wrap(h.devs)
			h.r.reopen(t, h.devs)
			if _, err := h.r.vol.Recover(context.Background()); err != nil {
				t.Fatalf("recover: %v", err)
			}
			if len(h.r.vol.Unsettled()) > 0 {
				return h
			}
		}
	}
	t.Fatal("no crash left an unsettled block")
	return nil
}

// checkUnsettled reads every block of the volume: an unsettled one (in
// unsettled) must fail with class ErrCorrupt, never read zeros or other
// bytes; the others read as the crash test allows (hole.may).
func checkUnsettled(t *testing.T, h *hole, unsettled map[int64]bool, when string) {
	t.Helper()
	ctx := context.Background()
	got := make([]byte, 4096)
	for blk := int64(0); blk < int64(len(h.old))/4096; blk++ {
		err := h.r.vol.ReadAt(ctx, got, blk*4096)
		vals, written := h.may[blk]
		switch {
		case unsettled[blk*4096] && err == nil:
			t.Fatalf("%s: unsettled block %d reads %x..., want class ErrCorrupt", when, blk, got[:8])
		case unsettled[blk*4096] && !errors.Is(err, blockdev.ErrCorrupt):
			t.Fatalf("%s: unsettled block %d: %v, want class ErrCorrupt", when, blk, err)
		case unsettled[blk*4096]:
		case err != nil:
			t.Fatalf("%s: block %d: %v", when, blk, err)
		case !written && !bytes.Equal(got, h.old[blk*4096:(blk+1)*4096]):
			t.Fatalf("%s: block %d, flushed before the crash, reads other bytes", when, blk)
		case written && !oneOf(got, vals):
			t.Fatalf("%s: block %d reads neither its old nor a new value", when, blk)
		}
	}
}

// moveLost moves every slot on h's lost namespace to the spare one.
func moveLost(t *testing.T, h *hole) {
	moveAllFrom(t, h.r, h.lostNS)
}

// moveAllFrom moves every slot on namespace ns to the spare one.
func moveAllFrom(t *testing.T, r *rig, ns string) {
	for seg := int64(0); seg < r.g.Segments(r.vol.Size()); seg++ {
		refs, ok, err := r.alloc.Lookup(context.Background(), seg)
		if err != nil || !ok {
			t.Fatalf("segment %d: %v %v", seg, ok, err)
		}
		for idx, ref := range refs {
			if ref.NS == ns {
				moveSlotTo(t, r, seg, idx)
			}
		}
	}
}

// moveSlotTo moves slot idx of segment seg to a free slot of the spare
// namespace (the rig's last).
func moveSlotTo(t *testing.T, r *rig, seg int64, idx int) {
	ctx := context.Background()
	to := SlotRef{NS: r.names[len(r.names)-1]}
	for r.alloc.Reserve(to) != nil {
		if to.Slot++; to.Slot >= 8 {
			t.Fatalf("no free slot on %s", to.NS)
		}
	}
	err := r.vol.MoveSlot(ctx, seg, idx, to, MoveOptions{Commit: func(ctx context.Context) error { return r.alloc.Replace(ctx, seg, idx, to) }})
	if err != nil {
		t.Fatalf("moving segment %d slot %d: %v", seg, idx, err)
	}
}

// TestMoveCarriesUnsettledRows: a crash mid-write plus the loss of a
// namespace leaves blocks no recovery can settle. Moving the lost slots
// elsewhere (what the controller's rebuilds do) must finish, carrying the
// unsettled blocks over: they still read as corrupt, after the move and
// after a new owner's recovery, never as zeros or other bytes, while every
// other block reads as before; a whole-stripe write still replaces them.
// Before, every move of such a slot failed ("lost in a crash and a
// namespace loss") and was retried for ever, the volume left degraded.
func TestMoveCarriesUnsettledRows(t *testing.T) {
	ctx := context.Background()
	h := unsettledHole(t, unsettledLayout)
	r := h.r
	unsettled := map[int64]bool{}
	for _, b := range r.vol.Unsettled() {
		unsettled[b.Offset] = true
	}
	t.Logf("%d unsettled blocks after the recovery (namespace %s lost)", len(unsettled), h.lostNS)
	checkUnsettled(t, h, unsettled, "after the recovery")
	told := map[int64]bool{}
	r.vol.ev.Unsettled = func(b UnsettledBlock) { told[b.Offset] = true }
	moveLost(t, h)
	if len(told) != len(unsettled) {
		t.Errorf("the move told of unsettled blocks %v, want the %d carried over", told, len(unsettled))
	}
	if r.vol.NeedsRepair() {
		t.Errorf("after moving every lost slot, the volume still needs repair")
	}
	for _, b := range r.vol.Unsettled() {
		if !unsettled[b.Offset] {
			t.Errorf("the move made block %d unsettled too", b.Offset)
		}
	}
	// Reads of the blanks the move wrote fail, and count no bad block:
	// each counted three before (the blank and its row's poisoned parity),
	// into the figures of any scrub running meanwhile.
	before := r.vol.ChecksumStats()
	checkUnsettled(t, h, unsettled, "after the move")
	if after := r.vol.ChecksumStats(); after.Mismatches != before.Mismatches {
		t.Errorf("reads after the move counted %d bad blocks in the unsettled rows", after.Mismatches-before.Mismatches)
	}
	// Rebalance the other slots of an unsettled row: a parity slot (its
	// poisoned blocks go over blank) and a data slot (copied as it is).
	b := r.vol.Unsettled()[0]
	moveSlotTo(t, r, b.Segment, r.g.SlotOf(b.Stripe, r.g.K))
	moveSlotTo(t, r, b.Segment, r.g.SlotOf(b.Stripe, (b.Shard+1)%r.g.K))
	checkUnsettled(t, h, unsettled, "after rebalancing the unsettled row's other slots")
	// A scrub leaves the known unsettled rows alone: it counts no bad
	// block there and rewrites nothing that would make them readable.
	before = r.vol.ChecksumStats()
	if _, err := r.vol.Scrub(ctx, 0, r.g.Segments(r.vol.Size())-1, nil); err != nil {
		t.Fatalf("scrub: %v", err)
	}
	if after := r.vol.ChecksumStats(); after.Mismatches != before.Mismatches {
		t.Errorf("scrub counted %d bad blocks in the unsettled rows", after.Mismatches-before.Mismatches)
	}
	checkUnsettled(t, h, unsettled, "after a scrub")
	// A new owner over the namespaces that now hold the volume.
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	devs := DeviceMap{}
	for n, d := range h.devs {
		if m, ok := d.(*blockdev.Mem); ok {
			d = m.CrashClone()
		}
		devs[n] = d
	}
	r.reopen(t, devs)
	if _, err := r.vol.Recover(ctx); err != nil {
		t.Fatalf("recover after the move: %v", err)
	}
	checkUnsettled(t, h, unsettled, "after the move and a new owner's recovery")
	if _, err := r.vol.Scrub(ctx, 0, r.g.Segments(r.vol.Size())-1, nil); err == nil {
		checkUnsettled(t, h, unsettled, "after a new owner's scrub")
	}
	// Settle zeroes exactly the unsettled blocks and keeps the rest.
	last := r.g.Segments(r.vol.Size()) - 1
	var done, total int64
	reset, err := r.vol.Settle(ctx, 0, last, func(d, n int64) { done, total = d, n })
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	if done != total || total != (last+1)*r.g.StripesPerSegment() {
		t.Errorf("settle progress ended at %d of %d", done, total)
	}
	if len(reset) != len(unsettled) {
		t.Errorf("settle reset %d blocks %v, want the %d unsettled", len(reset), reset, len(unsettled))
	}
	for _, off := range reset {
		if !unsettled[off] {
			t.Errorf("settle reset block at %d, which was not unsettled", off)
		}
		h.may[off/4096] = [][]byte{make([]byte, 4096)}
	}
	checkUnsettled(t, h, nil, "after settling")
	if again, err := r.vol.Settle(ctx, 0, last, nil); err != nil || len(again) != 0 {
		t.Errorf("settling again reset %v (%v), want nothing", again, err)
	}
	fresh := testutil.Pattern(len(h.old), 7)
	if err := r.vol.WriteAt(ctx, fresh, 0); err != nil {
		t.Fatalf("rewriting the volume: %v", err)
	}
	mustEqual(t, "volume rewritten after the move", mustRead(t, r.vol, 0, len(fresh)), fresh)
}

// TestMoveUnsettledFormat3Refuses: format 3 has no blank block that fails
// its check (a zero block's checksum is zero), so a move of the slot of an
// unsettled block still fails with class ErrCorrupt, and the block still
// reads as corrupt, never as zeros.
func TestMoveUnsettledFormat3Refuses(t *testing.T) {
	g := unsettledLayout
	g.Seed = 0
	h := unsettledHole(t, g)
	r := h.r
	unsettled := map[int64]bool{}
	for _, b := range r.vol.Unsettled() {
		unsettled[b.Offset] = true
	}
	b := r.vol.Unsettled()[0]
	to := SlotRef{NS: r.names[len(r.names)-1]}
	for r.alloc.Reserve(to) != nil {
		if to.Slot++; to.Slot >= 8 {
			t.Fatalf("no free slot on %s", to.NS)
		}
	}
	idx := r.g.SlotOf(b.Stripe, b.Shard)
	err := r.vol.MoveSlot(context.Background(), b.Segment, idx, to, MoveOptions{Commit: func(ctx context.Context) error { return r.alloc.Replace(ctx, b.Segment, idx, to) }})
	if !errors.Is(err, ErrMoveAborted) || !errors.Is(err, blockdev.ErrCorrupt) {
		t.Fatalf("moving the slot of an unsettled block of format 3: %v, want an aborted move of class ErrCorrupt", err)
	}
	checkUnsettled(t, h, unsettled, "after the refused move")
}
