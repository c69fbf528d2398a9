package volume

import (
	"context"
	"errors"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// unsettledHoleDown is unsettledHole (unsettledLayout) over devices each
// wrapped in a faultdev, returned by namespace so that a test can take
// one down.
func unsettledHoleDown(t *testing.T) (*hole, map[string]*faultdev.Dev) {
	fds := map[string]*faultdev.Dev{}
	h := unsettledHoleOn(t, unsettledLayout, func(devs DeviceMap) DeviceMap {
		out := DeviceMap{}
		for n, d := range devs {
			fds[n] = faultdev.New(d, 0)
			out[n] = fds[n]
		}
		return out
	})
	return h, fds
}

// nextShardNS is the namespace of the data shard after b's in b's stripe:
// it holds another block of b's row.
func nextShardNS(t *testing.T, r *rig, b UnsettledBlock) string {
	t.Helper()
	refs, _, err := r.alloc.Lookup(context.Background(), b.Segment)
	if err != nil {
		t.Fatal(err)
	}
	return refs[r.g.SlotOf(b.Stripe, (b.Shard+1)%r.g.K)].NS
}

// ownerWithoutRecord flushes h's volume and gives it a new owner that
// has lost the record of unsettled blocks.
func ownerWithoutRecord(t *testing.T, h *hole) {
	t.Helper()
	if err := h.r.vol.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.r.unsettled = NewMemUnsettledLog()
	newOwner(t, h)
}

// checkCorrupt fails t unless every block at an offset in offs reads
// with class ErrCorrupt.
func checkCorrupt(t *testing.T, r *rig, offs map[int64]bool, when string) {
	t.Helper()
	got := make([]byte, 4096)
	for off := range offs {
		if err := r.vol.ReadAt(context.Background(), got, off); !errors.Is(err, blockdev.ErrCorrupt) {
			t.Fatalf("unsettled block at %d %s: read %x... (%v), want class ErrCorrupt", off, when, got[:8], err)
		}
	}
}

// TestUnsettledRowKeepsItsNeighbours: a crash mid-write plus the loss of a
// namespace leaves blocks unsettled. The other blocks of their rows hold
// acknowledged data, and must survive what parity covers: the loss of
// another namespace of the row, once the first lost slots are rebuilt.
// Before, the recovery left the row's parity for a version of the row that
// was gone (poisoned), so the rebuild of the second namespace's slots wrote
// those blocks blank: acknowledged data lost, reads failing for good (the
// compound fault campaign's "acknowledged block reads EIO"). Now the
// recovery encodes the row's parity again with the unsettled block as
// zeros, marked so, and rebuilds use it; the unsettled block itself still
// reads as corrupt, also to an owner that lost the record of unsettled
// blocks and scrubs the volume: the marked parity never rebuilds it.
func TestUnsettledRowKeepsItsNeighbours(t *testing.T) {
	ctx := context.Background()
	h, fds := unsettledHoleDown(t)
	r := h.r
	want := unsettledOffsets(r.vol)
	moveLost(t, h)
	checkUnsettled(t, h, want, "after rebuilding the lost slots")

	// Lose the namespace of another data shard of an unsettled row.
	next := nextShardNS(t, r, r.vol.Unsettled()[0])
	fds[next].SetDown(true)
	checkUnsettled(t, h, want, "with "+next+" down too, before its slots are rebuilt")
	moveAllFrom(t, r, next)
	if got := unsettledOffsets(r.vol); len(got) != len(want) {
		t.Errorf("rebuilding %s's slots left %d blocks unsettled, want the %d the crash left", next, len(got), len(want))
	}
	checkUnsettled(t, h, want, "after losing "+next+" too and rebuilding its slots")
	newOwner(t, h)
	checkUnsettled(t, h, want, "after a new owner's recovery")

	// An owner without the record: the unsettled blocks are blank, and
	// the marked parity must not make them zeros, by recovery or scrub.
	ownerWithoutRecord(t, h)
	if _, err := r.vol.Scrub(ctx, 0, r.g.Segments(r.vol.Size())-1, nil); err != nil && !errors.Is(err, blockdev.ErrCorrupt) {
		t.Fatalf("scrub without the record: %v", err)
	}
	checkCorrupt(t, r, want, "with its record lost")
}

// TestWritesGoOnBesideUnsettledRows: a partial write to a stripe with an
// unsettled block fails with class ErrCorrupt when it touches the
// unsettled row (its parity is marked, encoded with the block as zeros),
// and goes through when it touches only other rows, whose parity is their
// own. Before, every partial write to the stripe failed until it was
// settled.
func TestWritesGoOnBesideUnsettledRows(t *testing.T) {
	ctx := context.Background()
	h := unsettledHole(t, unsettledLayout)
	r, g := h.r, h.r.g
	want := unsettledOffsets(r.vol)
	b := r.vol.Unsettled()[0]
	base := b.Segment*g.SegmentData() + b.Stripe*g.StripeData()
	at := func(sh int, row int64) int64 { return base + int64(sh)*g.Chunk + row*4096 }
	row := (b.Offset - at(b.Shard, 0)) / 4096
	other := (b.Shard + 1) % g.K
	if err := r.vol.WriteAt(ctx, testutil.Pattern(4096, 9), at(other, row)); !errors.Is(err, blockdev.ErrCorrupt) {
		t.Fatalf("a write to the unsettled row: %v, want class ErrCorrupt", err)
	}
	free := int64(-1) // a row of the stripe without unsettled blocks
	for cand := range g.BlocksPerChunk() {
		none := true
		for sh := range g.K {
			none = none && !want[at(sh, cand)]
		}
		if none {
			free = cand
			break
		}
	}
	if free < 0 {
		t.Fatal("setup: every row of the stripe holds an unsettled block")
	}
	data := testutil.Pattern(4096, 11)
	off := at(other, free)
	if err := r.vol.WriteAt(ctx, data, off); err != nil {
		t.Fatalf("a write to another row of the stripe: %v", err)
	}
	h.may[off/4096] = [][]byte{data}
	checkUnsettled(t, h, want, "after a write beside the unsettled row")
	newOwner(t, h)
	checkUnsettled(t, h, want, "after a new owner's recovery")
}

// TestMarkedParityNeverProvesAnOverStaleRow: an unsettled block carried
// over blank, its row's parity marked (encoded with it as zeros), the
// record of unsettled blocks lost, and then its slot and both parity
// slots missing the stripe (more stale slots than M): reads and Repair
// prove such a stripe row by row from every shard, counting a stale
// slot's block whatever its checksum. With the marked parity counted the
// row proved the blank as zeros, and a read returned them; the marked
// parity does not count, and the block reads as corrupt.
func TestMarkedParityNeverProvesAnOverStaleRow(t *testing.T) {
	ctx := context.Background()
	h := unsettledHole(t, unsettledLayout)
	r, g := h.r, h.r.g
	moveLost(t, h)
	b := r.vol.Unsettled()[0]
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	refs, _, err := r.alloc.Lookup(ctx, b.Segment)
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range []int{b.Shard, g.K, g.K + 1} {
		i := g.SlotOf(b.Stripe, sh)
		m := StaleSlot{Segment: b.Segment, Slot: i, Ref: refs[i], Stripes: []StripeRange{{From: b.Stripe, To: b.Stripe + 1}}}
		if err := r.stale.MarkStale(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	r.unsettled = NewMemUnsettledLog()
	newOwner(t, h)
	got := make([]byte, 4096)
	if err := r.vol.ReadAt(ctx, got, b.Offset); !errors.Is(err, blockdev.ErrCorrupt) {
		t.Fatalf("unsettled block, its record lost, its stripe over-stale: read %x... (%v), want class ErrCorrupt", got[:8], err)
	}
	_, _ = r.vol.Repair(ctx) // the row does not prove: its stripe stays marked
	if err := r.vol.ReadAt(ctx, got, b.Offset); !errors.Is(err, blockdev.ErrCorrupt) {
		t.Fatalf("after Repair: read %x... (%v), want class ErrCorrupt", got[:8], err)
	}
}

// TestLaterRecoveryKeepsBlanksBlank: an unsettled block carried over
// blank, then another crash recovery of its stripe with a second data
// shard lost. That recovery keeps the blocks of the stripe's rows that do
// not match their checksums as torn writes, with their checksums
// rewritten, but never a blank: kept, it would read zeros with a good
// checksum as soon as nothing lists it (its record lost), where the block
// had data. It must read as corrupt.
func TestLaterRecoveryKeepsBlanksBlank(t *testing.T) {
	ctx := context.Background()
	h, fds := unsettledHoleDown(t)
	r := h.r
	want := unsettledOffsets(r.vol)
	moveLost(t, h)
	next := nextShardNS(t, r, r.vol.Unsettled()[0])
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	fds[next].SetDown(true)
	newOwner(t, h) // its recovery settles the stripe again, without next
	fds[next].SetDown(false)
	if _, err := r.vol.Reinstate(ctx, next); err != nil {
		t.Fatal(err)
	}
	if _, err := r.vol.Repair(ctx); err != nil {
		t.Fatalf("repair once %s is back: %v", next, err)
	}
	checkUnsettled(t, h, want, "after a second recovery without "+next+" and a repair")
	ownerWithoutRecord(t, h)
	checkCorrupt(t, r, want, "after a second recovery, its record lost")
}

// TestKeepTornSkipsBlanks: a recovery keeps the blocks of an unsettled
// row that do not match their checksums as torn writes, rewriting their
// checksums, but not a blank (zeros stored with a checksum-area word of
// zero, what a rebuild writes for an unsettled block): kept, it would
// read as zeros once nothing listed it.
func TestKeepTornSkipsBlanks(t *testing.T) {
	ctx := context.Background()
	g := unsettledLayout
	r := newRig(t, g, g.SegmentData(), rigOptions{})
	mustWriteFlushed(t, r.vol, testutil.Pattern(int(g.StripeData()), 3), 0)
	s, err := r.vol.acquire(ctx, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.io.RUnlock()
	id := layout.StripeID{}
	rows := g.BlocksPerChunk()
	blank, torn := 1, 2 // data shards: shard 1 blank, shard 2 torn in row 0
	i := g.SlotOf(0, blank)
	sums := make([]uint32, rows)
	tags := g.SlotTags(0, i)
	for r := range rows {
		sums[r] = tags.Of(r)
	}
	if err := r.vol.slotWrite(ctx, s.slots[i], 0, 0, make([]byte, g.Chunk), sums, false); err != nil {
		t.Fatal(err)
	}
	j := g.SlotOf(0, torn)
	if err := r.vol.slotWrite(ctx, s.slots[j], 0, 0, testutil.Pattern(4096, 5), []uint32{blockSum(testutil.Pattern(4096, 6))}, false); err != nil {
		t.Fatal(err)
	}
	usable := r.vol.usableShards(s, id)
	img, err := r.vol.readImage(ctx, s, id, usable)
	if err != nil {
		t.Fatal(err)
	}
	defer img.bufs.release()
	r.vol.keepTorn(img, usable, 0, 0)
	if img.fixed[blank][0] {
		t.Error("a blank block was kept as a torn write")
	}
	if !img.fixed[torn][0] {
		t.Error("a torn block was not kept")
	}
}

// TestUnsettledRowRebuildWaitsForItsShards: the rebuild of a slot holding
// an acknowledged block of a re-protected row, with too few of the row's
// other blocks good and reachable (one is bad, one parity namespace away:
// a partition, not a loss), must fail and be retried, not carry the block
// over blank: once the namespace is back the rebuild finds it. Before, the
// rebuild finished with the block written blank, acknowledged data lost
// for good (the compound campaign: the controller rebuilt a slot while
// partitioned from a target).
func TestUnsettledRowRebuildWaitsForItsShards(t *testing.T) {
	ctx := context.Background()
	h, fds := unsettledHoleDown(t)
	r, g := h.r, h.r.g
	want := unsettledOffsets(r.vol)
	moveLost(t, h)
	b := r.vol.Unsettled()[0]
	refs, _, err := r.alloc.Lookup(ctx, b.Segment)
	if err != nil {
		t.Fatal(err)
	}
	slotOf := func(sh int) int { return g.SlotOf(b.Stripe, sh) }
	row := (b.Offset - (b.Segment*g.SegmentData() + b.Stripe*g.StripeData() + int64(b.Shard)*g.Chunk)) / 4096
	id := layout.StripeID{Segment: b.Segment, Stripe: b.Stripe}
	bad := refs[slotOf((b.Shard+2)%g.K)] // its block of the row rots
	if err := fds[bad.NS].WriteAt(ctx, testutil.Pattern(4096, 13), bad.Slot*g.SlotSize+g.SlotOffset(id)+row*4096); err != nil {
		t.Fatal(err)
	}
	lost, away := slotOf((b.Shard+1)%g.K), refs[slotOf(g.K)].NS
	fds[refs[lost].NS].SetDown(true)
	fds[away].SetDown(true)
	to := SlotRef{NS: r.names[len(r.names)-1]}
	for r.alloc.Reserve(to) != nil {
		to.Slot++
	}
	move := func() error {
		return r.vol.MoveSlot(ctx, b.Segment, lost, to, MoveOptions{Commit: func(ctx context.Context) error { return r.alloc.Replace(ctx, b.Segment, lost, to) }})
	}
	if err := move(); err == nil {
		t.Errorf("the rebuild of slot %d with %s away and a bad block in the unsettled row finished", lost, away)
	}
	if got := unsettledOffsets(r.vol); len(got) != len(want) {
		t.Fatalf("the rebuild made %d blocks unsettled, want the %d the crash left", len(got), len(want))
	}
	fds[away].SetDown(false)
	if _, err := r.vol.Reinstate(ctx, away); err != nil {
		t.Fatal(err)
	}
	if err := move(); err != nil {
		t.Fatalf("the rebuild once %s is back: %v", away, err)
	}
	if _, err := r.vol.Scrub(ctx, 0, g.Segments(r.vol.Size())-1, nil); err != nil {
		t.Fatalf("scrub: %v", err)
	}
	checkUnsettled(t, h, want, "after the rebuild once the namespace was back")
}

// TestRecoveryUsesMarkedParity: a write beside a re-protected row (another
// row of its stripe), the owner gone before a flush, and the namespace of
// another data shard of the row lost: the next owner's recovery settles
// the stripe without that shard, and must solve its block of the
// re-protected row with the marked parity, as a rebuild does. Before, it
// found too few good blocks there, took the acknowledged block for one
// lost in the crash and made it unsettled too (the compound campaign,
// seeds 28076, 28079 and 28081: acknowledged blocks reading EIO).
func TestRecoveryUsesMarkedParity(t *testing.T) {
	ctx := context.Background()
	h, fds := unsettledHoleDown(t)
	r, g := h.r, h.r.g
	want := unsettledOffsets(r.vol)
	moveLost(t, h)
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b := r.vol.Unsettled()[0]
	base := b.Segment*g.SegmentData() + b.Stripe*g.StripeData()
	at := func(sh int, row int64) int64 { return base + int64(sh)*g.Chunk + row*4096 }
	row := (b.Offset - at(b.Shard, 0)) / 4096
	other := (b.Shard + 1) % g.K
	free := (row + 1) % g.BlocksPerChunk()
	data := testutil.Pattern(4096, 17)
	if err := r.vol.WriteAt(ctx, data, at(other, free)); err != nil {
		t.Fatalf("a write beside the unsettled row: %v", err)
	}
	h.may[at(other, free)/4096] = append(h.may[at(other, free)/4096], data, h.old[at(other, free):at(other, free)+4096])
	refs, _, err := r.alloc.Lookup(ctx, b.Segment)
	if err != nil {
		t.Fatal(err)
	}
	lost := "" // the namespace of another data shard of the row, holding no other slot of the segment
	for sh := range g.K {
		ns, n := refs[g.SlotOf(b.Stripe, sh)].NS, 0
		for _, ref := range refs {
			if ref.NS == ns {
				n++
			}
		}
		if sh != b.Shard && sh != other && n == 1 {
			lost = ns
		}
	}
	if lost == "" {
		t.Fatalf("setup: no other data shard of the row alone on its namespace: %v", refs)
	}
	fds[lost].SetDown(true)
	r.reopen(t, h.devs) // no flush: the write's record is live
	if _, err := r.vol.Recover(ctx); err != nil && !errors.Is(err, blockdev.ErrCorrupt) {
		t.Fatalf("recover without %s: %v", lost, err)
	}
	if got := unsettledOffsets(r.vol); len(got) != len(want) {
		t.Errorf("the recovery without %s left %d blocks unsettled, want the %d the crash left: %v", lost, len(got), len(want), got)
	}
	checkUnsettled(t, h, want, "after a recovery without "+lost)
}
