package volclient

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/volume"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// blankRow is the unsettled block the tests record: segment 0, stripe 1,
// data shard 2, block 3 of the chunk.
var blankRow = volume.UnsettledRow{Stripe: 1, Shard: 2, Row: 3}

// blankOffset is the volume offset of block b of segment seg.
func blankOffset(g layout.Geometry, seg int64, b volume.UnsettledRow) int64 {
	return seg*g.SegmentData() + b.Stripe*g.StripeData() + int64(b.Shard)*g.Chunk + b.Row*layout.ChecksumBlock
}

// unsettledMover creates volume "v" (4+2, checksums) on tc and writes it
// whole: random bytes, but zeros in blankRow's row of every data shard (so
// its parity is zeros too: the row reads as zeros everywhere, as a row a
// rebuild carried over blank can). It then maps it as the controller's
// mover does (the read-write mapping readers share the volume with) and
// returns that mapping, what was written and blankRow's volume offset.
func unsettledMover(t *testing.T, tc *testCluster) (*Mapped, []byte, int64) {
	return unsettledMoverOf(t, tc, meta.Layout{K: 4, M: 2, Chunk: 64 << 10, Checksum: meta.ChecksumCRC32C})
}

// unsettledMoverOf is unsettledMover for a volume of layout l.
func unsettledMoverOf(t *testing.T, tc *testCluster, l meta.Layout) (*Mapped, []byte, int64) {
	t.Helper()
	ctx := context.Background()
	const size = 8 << 20
	if _, err := tc.store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: size, Layout: l}); err != nil {
		t.Fatal(err)
	}
	c, err := tc.store.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := tc.store.Volume(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	g := rec.Layout.Geometry(c.SlotSize)
	model := make([]byte, size)
	rand.New(rand.NewSource(3)).Read(model)
	for sh := range g.K {
		b := blankRow
		b.Shard = sh
		off := blankOffset(g, 0, b)
		clear(model[off : off+layout.ChecksumBlock])
	}
	writeOnce(ctx, t, tc.store, "v", model)
	o := testOpenOptions("mover")
	o.Mover = true
	mover, err := OpenVolume(ctx, tc.store, "v", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mover.Close(context.Background()) })
	return mover, model, blankOffset(g, 0, blankRow)
}

// recordBlank records blankRow unsettled in etcd, as the mover's rebuild
// does for a block it carries over blank.
func recordBlank(t *testing.T, mover *Mapped) {
	t.Helper()
	err := segmentMap{mover.Map}.SetUnsettled(context.Background(), volume.UnsettledSegment{Segment: 0, Blocks: []volume.UnsettledRow{blankRow}})
	if err != nil {
		t.Fatal(err)
	}
}

// checkBlankCorrupt checks that reader r fails the read of the recorded
// block with class ErrCorrupt (never its zeros) and reads the blocks
// beside it as written.
func checkBlankCorrupt(t *testing.T, r *Mapped, model []byte, off int64, when string) {
	t.Helper()
	ctx := context.Background()
	got := make([]byte, 4096)
	err := r.Volume.ReadAt(ctx, got, off)
	if blockdev.Class(err) != blockdev.ErrCorrupt {
		t.Errorf("%s: reading the recorded unsettled block at %d: err %v (class %v), all zeros %v; want class ErrCorrupt",
			when, off, err, blockdev.Class(err), !slices.ContainsFunc(got, func(b byte) bool { return b != 0 }))
	}
	for _, o := range []int64{off - 4096, off + 4096} {
		if err := r.Volume.ReadAt(ctx, got, o); err != nil || !bytes.Equal(got, model[o:o+4096]) {
			t.Errorf("%s: the block at %d beside it: err %v, as written %v", when, o, err, bytes.Equal(got, model[o:o+4096]))
		}
	}
}

// TestReaderOpenKnowsRecordedBlank: the mover of a volume has recorded
// an unsettled block (a blank a rebuild wrote) in etcd; a read-only
// mapping opened afterwards fails the read of that block with class
// ErrCorrupt (EIO to NBD), though its row reads as zeros throughout, and
// reads the blocks beside it. A reader goes by the record alone (it never
// resyncs or settles anything): without reading it at open, it would
// return the blank's zeros as data.
func TestReaderOpenKnowsRecordedBlank(t *testing.T) {
	tc := newTestCluster(t, 6, 64<<20, 4<<20)
	mover, model, off := unsettledMover(t, tc)
	recordBlank(t, mover)
	o := testOpenOptions("reader")
	o.ReadOnly = true
	r, err := OpenVolume(context.Background(), tc.store, "v", o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	checkBlankCorrupt(t, r, model, off, "a reader mapped after the record")
}

// TestReaderFollowKnowsRecordedBlank: a read-only mapping is mapped
// first; then the mover records an unsettled block of segment 0 and
// moves a slot of the segment (what a rebuild that writes blanks does).
// Once the reader has switched to the move's slot, its read of the block
// fails with class ErrCorrupt: the follower reads the record again before
// it follows a move, else the reader would return the blank's zeros.
func TestReaderFollowKnowsRecordedBlank(t *testing.T) {
	tc := newTestCluster(t, 7, 64<<20, 4<<20)
	ctx := context.Background()
	mover, model, off := unsettledMover(t, tc)
	o := testOpenOptions("reader")
	o.ReadOnly = true
	r, err := OpenVolume(ctx, tc.store, "v", o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	// The reader reads segment 0 (it caches its slots) before the record.
	if err := r.Volume.ReadAt(ctx, make([]byte, layout.ChecksumBlock), 0); err != nil {
		t.Fatal(err)
	}
	recordBlank(t, mover)
	seg, err := mover.Map.Segment(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	to := ""
	for i := range tc.targets {
		ns := fmt.Sprintf("h%d-n1", i)
		if !slices.ContainsFunc(seg.Slots, func(s meta.SlotRef) bool { return s.NS == ns }) {
			to = ns
		}
	}
	if err := mover.MoveShard(ctx, 0, 0, to, nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the reader reading segment 0 from the move's namespace", func() bool {
		return slices.ContainsFunc(r.Volume.CachedSlots()[0], func(s volume.SlotRef) bool { return s.NS == to })
	})
	checkBlankCorrupt(t, r, model, off, "a reader that followed a move after the record")
}

// TestTaskMoverLogsCarriedBlocks: the controller's mover rebuilds a slot
// of a stripe with an unsettled block, which the move carries over: it
// logs the block, with the offset and the command that settles it, as a
// mapping's agent does. Before, blocks the controller's rebuilds carried
// over unsettled were told nowhere.
func TestTaskMoverLogsCarriedBlocks(t *testing.T) {
	tc := newTestCluster(t, 7, 64<<20, 4<<20)
	ctx := context.Background()
	// Format 4 (checksums bound to their place): what carries a block
	// over blank.
	mover, _, off := unsettledMoverOf(t, tc, meta.Layout{K: 4, M: 2, Chunk: 64 << 10, Checksum: meta.ChecksumCRC32C, ChecksumSeed: 0x5e77})
	recordBlank(t, mover)
	seg, err := mover.Map.Segment(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	g := mover.Volume.Geometry()
	slot := g.SlotOf(blankRow.Stripe, blankRow.Shard)
	to := ""
	for i := range tc.targets {
		if ns := fmt.Sprintf("h%d-n1", i); !slices.ContainsFunc(seg.Slots, func(s meta.SlotRef) bool { return s.NS == ns }) {
			to = ns
		}
	}
	if err := mover.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var logged testutil.Buffer
	o := testOpenOptions("ctl")
	o.Logf = logged.Logf
	tm := NewTaskMover(tc.store, o)
	req := moves.Request{Volume: "v", Segment: 0, Shard: slot, To: to, Progress: func(int64, int64) {}}
	if err := tm.MoveShard(ctx, req); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("v: block at offset %d lost in a crash mid-write", off)
	if !strings.Contains(logged.String(), want) {
		t.Errorf("the controller's mover logged %q; want a line %q...", logged.String(), want)
	}
}
