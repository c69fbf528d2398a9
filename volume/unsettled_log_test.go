package volume

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// newOwner flushes h's volume and opens it again as a new owner would,
// over the devices as they are, and recovers it.
func newOwner(t *testing.T, h *hole) {
	t.Helper()
	ctx := context.Background()
	if err := h.r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	h.r.reopen(t, h.devs)
	if _, err := h.r.vol.Recover(ctx); err != nil {
		t.Fatalf("recover: %v", err)
	}
}

// unsettledOffsets returns the offsets Volume.Unsettled lists.
func unsettledOffsets(v *Volume) map[int64]bool {
	out := map[int64]bool{}
	for _, b := range v.Unsettled() {
		out[b.Offset] = true
	}
	return out
}

// recordedOffsets returns the volume offsets of the blocks the rig's
// UnsettledLog records.
func recordedOffsets(t *testing.T, r *rig) map[int64]bool {
	t.Helper()
	segs, err := r.unsettled.ListUnsettled(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]bool{}
	for _, s := range segs {
		if s.More {
			t.Errorf("segment %d recorded with More", s.Segment)
		}
		for _, b := range s.Blocks {
			out[r.vol.unsettledBlock(layout.StripeID{Segment: s.Segment, Stripe: b.Stripe}, b.Shard, b.Row).Offset] = true
		}
	}
	return out
}

// firstUnsettledStripe returns the volume offset of the stripe that holds
// the first block the volume lists unsettled.
func firstUnsettledStripe(r *rig) int64 {
	first := r.vol.Unsettled()[0]
	return first.Segment*r.g.SegmentData() + first.Stripe*r.g.StripeData()
}

// stripeWritten notes that data, a whole stripe, was written at off: its
// blocks are settled (gone from want) and read back as data.
func stripeWritten(h *hole, want map[int64]bool, off int64, data []byte) {
	for at := int64(0); at < int64(len(data)); at += 4096 {
		delete(want, off+at)
		h.may[(off+at)/4096] = [][]byte{data[at : at+4096]}
	}
}

// checkRecorded fails t unless the rig's UnsettledLog records exactly the
// blocks of want.
func checkRecorded(t *testing.T, r *rig, want map[int64]bool, when string) {
	t.Helper()
	if got := recordedOffsets(t, r); !maps.Equal(got, want) {
		t.Errorf("%s the record lists %v, want %v", when, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
}

// TestUnsettledRowsSurviveNewOwner: a move carries unsettled rows over
// blank, the owner goes, and a new owner recovers the volume (its resync
// marks the segments clean). The new owner still lists every unsettled
// block, a scrub reports them unsettled and counts no bad block, reads of
// them still fail with class ErrCorrupt. A whole-stripe write settles the
// blocks of its stripe, and Settle the rest: each time the record shrinks,
// and the owner after lists only what is left. Before, the new owner
// listed nothing and each of its scrubs counted every unsettled row as
// three bad blocks.
func TestUnsettledRowsSurviveNewOwner(t *testing.T) {
	ctx := context.Background()
	h := unsettledHole(t, unsettledLayout)
	r := h.r
	want := unsettledOffsets(r.vol)
	moveLost(t, h)
	if got := recordedOffsets(t, r); !maps.Equal(got, want) {
		t.Fatalf("recorded %v, want the unsettled blocks %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	newOwner(t, h)
	if got := unsettledOffsets(r.vol); !maps.Equal(got, want) {
		t.Fatalf("a new owner lists unsettled blocks %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	if r.vol.UnsettledMore() {
		t.Errorf("UnsettledMore with %d blocks recorded", len(want))
	}
	checkUnsettled(t, h, want, "after a new owner's recovery")
	before := r.vol.ChecksumStats()
	if _, err := r.vol.Scrub(ctx, 0, r.g.Segments(r.vol.Size())-1, nil); err != nil {
		t.Fatalf("scrub: %v", err)
	}
	after := r.vol.ChecksumStats()
	if bad := after.Mismatches - before.Mismatches; bad != 0 {
		t.Errorf("the new owner's scrub counted %d bad blocks, want 0", bad)
	}
	if n := after.Unsettled - before.Unsettled; n != int64(len(want)) {
		t.Errorf("the new owner's scrub reported %d unsettled blocks, want %d", n, len(want))
	}
	checkUnsettled(t, h, want, "after the new owner's scrub")

	// A write of the whole stripe of one unsettled block settles the
	// blocks of that stripe, in the record too.
	off := firstUnsettledStripe(r)
	data := testutil.Pattern(int(r.g.StripeData()), 9)
	if err := r.vol.WriteAt(ctx, data, off); err != nil {
		t.Fatalf("writing the stripe of an unsettled block: %v", err)
	}
	stripeWritten(h, want, off, data)
	checkRecorded(t, r, want, "after a whole-stripe write")
	newOwner(t, h)
	if got := unsettledOffsets(r.vol); !maps.Equal(got, want) {
		t.Errorf("after a whole-stripe write, the next owner lists %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	checkUnsettled(t, h, want, "after a whole-stripe write and a new owner")

	// Settle resets the rest and clears the record.
	reset, err := r.vol.Settle(ctx, 0, r.g.Segments(r.vol.Size())-1, nil)
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	if got := map[int64]bool{}; len(reset) != len(want) {
		for _, o := range reset {
			got[o] = true
		}
		t.Errorf("settle reset %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	if got := recordedOffsets(t, r); len(got) != 0 {
		t.Errorf("after settle the record lists %v", slices.Sorted(maps.Keys(got)))
	}
	newOwner(t, h)
	if got := r.vol.Unsettled(); len(got) != 0 {
		t.Errorf("after settle the next owner lists %v", got)
	}
}

// TestUnsettledRecordCap: the blocks a volume records are bounded
// (MaxRecordedUnsettled; here 10); a segment whose blocks do not all fit
// is recorded with More, which a new owner reports (UnsettledMore), and
// Settle of the segment clears.
func TestUnsettledRecordCap(t *testing.T) {
	ctx := context.Background()
	g := unsettledLayout
	r := newRig(t, g, 2*g.SegmentData(), rigOptions{})
	r.vol.poisoned.limit = 10
	rows := []int64{0, 1, 2, 3}
	poison := func(seg, stripe int64, shard int) {
		t.Helper()
		if err := r.vol.poisonMore(ctx, layout.StripeID{Segment: seg, Stripe: stripe}, shard, rows); err != nil {
			t.Fatal(err)
		}
	}
	poison(0, 0, 0)
	poison(0, 1, 2)
	poison(1, 0, 0)
	poison(1, 0, 1)
	segs, err := r.unsettled.ListUnsettled(ctx)
	if err != nil || len(segs) != 2 {
		t.Fatalf("recorded %d segments (%v), want 2", len(segs), err)
	}
	if len(segs[0].Blocks) != 8 || segs[0].More || len(segs[1].Blocks) != 2 || !segs[1].More {
		t.Errorf("recorded %d blocks (more %v) and %d (more %v), want 8 and 2 with more", len(segs[0].Blocks), segs[0].More, len(segs[1].Blocks), segs[1].More)
	}
	if !r.vol.UnsettledMore() {
		t.Error("UnsettledMore is false past the cap")
	}
	r.reopen(t, r.deviceMap())
	if err := r.vol.LoadUnsettled(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(r.vol.Unsettled()); n != 10 || !r.vol.UnsettledMore() {
		t.Errorf("a new owner lists %d blocks, more %v: want 10 and more", n, r.vol.UnsettledMore())
	}
	if _, err := r.vol.Settle(ctx, 0, 1, nil); err != nil {
		t.Fatalf("settle: %v", err)
	}
	if segs, err := r.unsettled.ListUnsettled(ctx); err != nil || len(segs) != 0 || r.vol.UnsettledMore() {
		t.Errorf("after settle: recorded %v (%v), more %v", segs, err, r.vol.UnsettledMore())
	}
}

// TestLoadUnsettledChecksRecord: a record naming a block outside the
// layout (a parity shard, a stripe past the segment) fails the load with
// class ErrInvalid and loads nothing.
func TestLoadUnsettledChecksRecord(t *testing.T) {
	ctx := context.Background()
	g := unsettledLayout
	for _, b := range []UnsettledRow{{Stripe: 0, Shard: g.K, Row: 0}, {Stripe: g.StripesPerSegment(), Shard: 0, Row: 0}, {Stripe: 0, Shard: 0, Row: g.BlocksPerChunk()}, {Stripe: -1}} {
		r := newRig(t, g, g.SegmentData(), rigOptions{})
		if err := r.unsettled.SetUnsettled(ctx, UnsettledSegment{Segment: 0, Blocks: []UnsettledRow{b}}); err != nil {
			t.Fatal(err)
		}
		r.reopen(t, r.deviceMap())
		if err := r.vol.LoadUnsettled(ctx); !errors.Is(err, blockdev.ErrInvalid) {
			t.Errorf("loading a record of block %+v: %v, want class ErrInvalid", b, err)
		}
		if got := r.vol.Unsettled(); len(got) != 0 {
			t.Errorf("a bad record loaded %v", got)
		}
	}
}

// TestZeroingSettlesUnsettledStripe: trimming (or zeroing) the whole
// stripe of a blank block writes every shard of it, parity included, as
// a whole-stripe write does: the stripe reads zeros and takes partial
// writes, and its blocks leave the list and the record. Before, they
// stayed listed, for this owner and every later one, and every write of
// part of the stripe failed as corrupt.
func TestZeroingSettlesUnsettledStripe(t *testing.T) {
	ctx := context.Background()
	for _, op := range []string{"trim", "write-zeroes"} {
		h := unsettledHole(t, unsettledLayout)
		r := h.r
		moveLost(t, h)
		want := unsettledOffsets(r.vol)
		off := firstUnsettledStripe(r)
		zero := r.vol.Trim
		if op == "write-zeroes" {
			zero = r.vol.WriteZeroes
		}
		if err := zero(ctx, off, r.g.StripeData()); err != nil {
			t.Fatalf("%s of the stripe of an unsettled block: %v", op, err)
		}
		stripeWritten(h, want, off, make([]byte, r.g.StripeData()))
		if got := unsettledOffsets(r.vol); !maps.Equal(got, want) {
			t.Errorf("%s: lists %v after, want %v", op, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
		checkRecorded(t, r, want, "after the "+op+",")
		checkUnsettled(t, h, want, op+" of an unsettled stripe")
		block := testutil.Pattern(4096, 3)
		if err := r.vol.WriteAt(ctx, block, off); err != nil {
			t.Errorf("%s: a write of part of the zeroed stripe: %v", op, err)
		}
		h.may[off/4096] = [][]byte{block}
		newOwner(t, h)
		checkUnsettled(t, h, want, op+" of an unsettled stripe and a new owner")
	}
}

// failingLog is an UnsettledLog whose writes fail while fail is set.
type failingLog struct {
	*MemUnsettledLog
	fail bool
}

func (l *failingLog) SetUnsettled(ctx context.Context, s UnsettledSegment) error {
	if l.fail {
		return errors.New("etcd unreachable")
	}
	return l.MemUnsettledLog.SetUnsettled(ctx, s)
}

// TestUnsettledRecordRewrittenAfterFailure: a whole-stripe write whose
// clearing of the record fails is not done; once the log answers again,
// the next write of the stripe clears the record, though the blocks were
// already forgotten in memory. Otherwise the record would keep blocks the
// write settled, which a new owner would read as corrupt and a settle
// would reset to zeros.
func TestUnsettledRecordRewrittenAfterFailure(t *testing.T) {
	ctx := context.Background()
	h := unsettledHole(t, unsettledLayout)
	r := h.r
	moveLost(t, h)
	want := unsettledOffsets(r.vol)
	off := firstUnsettledStripe(r)
	log := &failingLog{MemUnsettledLog: r.unsettled, fail: true}
	r.vol.unsettledLog = log
	data := testutil.Pattern(int(r.g.StripeData()), 5)
	if err := r.vol.WriteAt(ctx, data, off); err == nil {
		t.Fatal("a whole-stripe write whose record could not be cleared succeeded")
	}
	if got := recordedOffsets(t, r); !maps.Equal(got, want) {
		t.Fatalf("after the failed clearing the record lists %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	log.fail = false
	if err := r.vol.WriteAt(ctx, data, off); err != nil {
		t.Fatalf("writing the stripe again: %v", err)
	}
	stripeWritten(h, want, off, data)
	checkRecorded(t, r, want, "after the second write")
	newOwner(t, h)
	checkUnsettled(t, h, want, "after the stripe was written and a new owner")
}

// TestReaderKnowsUnsettledBlanks: a move carries unsettled rows over
// blank and a new owner recovers the volume; a read-only volume opened
// over the devices afterwards, once FollowUnsettled has loaded the record
// (what a read-only mapping does at open and before it follows each
// move), lists the same unsettled blocks, reads each of them as corrupt
// and every other block as the owner does; a second call forgets and
// doubles nothing. Before, a read-only mapping never read the record: it
// relied on the row's parity not matching the blank, which the fault
// campaign found a way past (a fresh read-only mapping read zeros for a
// block the owner had rebuilt blank).
func TestReaderKnowsUnsettledBlanks(t *testing.T) {
	ctx := context.Background()
	h := unsettledHole(t, unsettledLayout)
	r := h.r
	want := unsettledOffsets(r.vol)
	moveLost(t, h)
	newOwner(t, h)
	r.epoch++
	v, err := New(Options{Geometry: r.g, Size: r.vol.Size(), Devices: h.devs, Alloc: r.alloc, Dirty: r.dirty, Stale: r.stale, Unsettled: r.unsettled, ReadOnly: true, LogEpoch: r.epoch})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := v.FollowUnsettled(ctx); err != nil {
			t.Fatal(err)
		}
		if got := unsettledOffsets(v); !maps.Equal(got, want) {
			t.Fatalf("the reader lists unsettled blocks %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
	}
	owner := r.vol
	r.vol = v
	defer func() { r.vol = owner }()
	checkUnsettled(t, h, want, "a reader after FollowUnsettled")
}
