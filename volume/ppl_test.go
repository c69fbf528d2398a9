package volume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/ec"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// pplLayouts are the format 3 geometries (checksums and write log) of the
// write-hole tests: one parity (md's RAID5 case) and two.
var pplLayouts = []layout.Geometry{
	{K: 3, M: 1, Chunk: 8 << 10, SlotSize: 256 << 10, Checksums: true, Log: true},
	{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 512 << 10, Checksums: true, Log: true},
}

// holeWorkload overwrites part of every stripe of a volume written and
// flushed before, without a flush: one 4 KiB block, a whole chunk, two
// blocks of different chunks in two writes, a write across two chunks,
// two whole chunks, or the same row of two chunks with one block written
// twice, by stripe. It returns the values each overwritten block may hold (the
// old one first).
func holeWorkload(t *testing.T, r *rig, old []byte) map[int64][][]byte {
	ctx := context.Background()
	g := r.g
	may := map[int64][][]byte{}
	write := func(off int64, b []byte) {
		if err := r.vol.WriteAt(ctx, b, off); err != nil {
			t.Fatalf("write %d+%d: %v", off, len(b), err)
		}
		for i := int64(0); i < int64(len(b)); i += 4096 {
			blk := (off + i) / 4096
			if may[blk] == nil {
				may[blk] = [][]byte{old[blk*4096 : (blk+1)*4096]}
			}
			may[blk] = append(may[blk], b[i:i+4096])
		}
	}
	stripes := int64(len(old)) / g.StripeData()
	for s := int64(0); s < stripes; s++ {
		base := s * g.StripeData()
		seed := byte(s*3 + 11)
		switch s % 6 {
		case 0:
			write(base+(s%int64(g.K))*g.Chunk+4096, testutil.Pattern(4096, seed))
		case 1:
			write(base+((s+1)%int64(g.K))*g.Chunk, testutil.Pattern(int(g.Chunk), seed))
		case 2:
			write(base, testutil.Pattern(4096, seed))
			write(base+g.Chunk+4096, testutil.Pattern(4096, seed+1))
		case 3:
			write(base+g.Chunk-4096, testutil.Pattern(8192, seed))
		case 4: // two chunks in one write: rows with two data blocks written
			write(base+g.Chunk, testutil.Pattern(int(2*g.Chunk), seed))
		case 5: // the same row of two chunks, and one block twice
			write(base+4096, testutil.Pattern(4096, seed))
			write(base+2*g.Chunk+4096, testutil.Pattern(4096, seed+1))
			write(base+4096, testutil.Pattern(4096, seed+2))
		}
	}
	return may
}

// shardNS names the namespace that holds the block at volume offset off.
func shardNS(t tb, r *rig, off int64) string {
	g := r.g
	seg, in := off/g.SegmentData(), off%g.SegmentData()
	stripe, shard := in/g.StripeData(), int(in%g.StripeData()/g.Chunk)
	refs, ok, err := r.alloc.Lookup(context.Background(), seg)
	if err != nil || !ok {
		t.Fatalf("segment %d: %v %v", seg, ok, err)
	}
	return refs[g.SlotOf(stripe, shard)].NS
}

// TestWriteHoleCrashLostShard is the write hole's crash test: a volume is
// written and flushed, every stripe then takes a partial write, the owner
// crashes with each unflushed block kept or lost at random (data and
// parity of a stripe disagree), and one namespace is lost before the next
// owner's recovery. Every block not overwritten since the flush must read
// back as written (the write hole returns other bytes for them); an
// overwritten block reads its old or new value, or fails with class
// ErrCorrupt when it is on the lost namespace, never other bytes. Each
// namespace is lost in turn, so the lost shard is a written data chunk, an
// untouched one or parity, depending on the stripe.
func TestWriteHoleCrashLostShard(t *testing.T) {
	var total LogStats
	for _, g := range pplLayouts {
		for lost := 0; lost < g.N(); lost++ {
			for seed := int64(1); seed <= 3; seed++ {
				t.Run(fmt.Sprintf("%v/lost=ns%02d/seed=%d", g, lost, seed), func(t *testing.T) {
					st := writeHoleCase(t, g, lost, seed)
					total.Partial += st.Partial
					total.Parity += st.Parity
					total.Unsettled += st.Unsettled
				})
			}
		}
	}
	// Both ways of solving a lost block, and the refusal, were taken.
	if total.Partial == 0 || total.Parity == 0 || total.Unsettled == 0 {
		t.Fatalf("recoveries solved lost blocks %+v; want some of each kind", total)
	}
	t.Logf("lost blocks in rows written at the crash: %+v", total)
}

func writeHoleCase(t *testing.T, g layout.Geometry, lost int, seed int64) LogStats {
	ctx := context.Background()
	h := crashAndLose(t, g, lost, seed)
	h.check(t)
	st := h.r.vol.LogStats()
	// The next owner, the namespace still lost: what the recovery
	// could not settle still reads as corrupt, never as other bytes.
	if err := h.r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	again := DeviceMap{}
	for i, n := range h.r.names {
		if i != lost {
			again[n] = h.devs[n].(*blockdev.Mem).CrashClone()
		}
	}
	again[h.lostNS] = h.devs[h.lostNS]
	h.r.reopen(t, again)
	if _, err := h.r.vol.Recover(ctx); err != nil {
		t.Fatalf("second recover: %v", err)
	}
	h.check(t)
	// Writing whole stripes replaces even the blocks lost for good.
	fresh := testutil.Pattern(len(h.old), 5)
	if err := h.r.vol.WriteAt(ctx, fresh, 0); err != nil {
		t.Fatalf("rewriting the volume: %v", err)
	}
	mustEqual(t, "volume rewritten after the crash", mustRead(t, h.r.vol, 0, len(fresh)), fresh)
	return st
}

// hole is a volume after a crash mid-write and the loss of a namespace,
// recovered by its next owner.
type hole struct {
	r      *rig
	old    []byte             // the contents flushed before the crash
	may    map[int64][][]byte // the values a block written since may hold
	devs   DeviceMap          // the devices after the crash
	lostNS string
}

// crashWithLost is crashAndLose up to the crash: h.devs are the devices
// after it, namespace lost down; nothing is reopened.
func crashWithLost(t *testing.T, g layout.Geometry, lost int, seed int64) *hole {
	return crashWithLostOn(t, g, lost, seed, rigOptions{crashable: true})
}

// crashWithLostOn is crashWithLost on a rig built with o (crashable).
func crashWithLostOn(t *testing.T, g layout.Geometry, lost int, seed int64, o rigOptions) *hole {
	return crashFilled(t, g, lost, seed, o, func(n int) []byte { return testutil.Pattern(n, 1) })
}

// crashFilled is crashWithLostOn over a volume whose content before the
// workload is fill(its size).
func crashFilled(t *testing.T, g layout.Geometry, lost int, seed int64, o rigOptions, fill func(n int) []byte) *hole {
	ctx := context.Background()
	size := 2 * g.SegmentData()
	r := newRig(t, g, size, o)
	h := &hole{r: r, old: fill(int(size)), devs: DeviceMap{}, lostNS: r.names[lost]}
	if err := r.vol.WriteAt(ctx, h.old, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	h.may = holeWorkload(t, r, h.old)
	rng := rand.New(rand.NewSource(seed))
	for i, m := range r.mems {
		h.devs[r.names[i]] = m.CrashCloneRand(rng)
	}
	gone := faultdev.New(h.devs[h.lostNS], seed)
	gone.SetDown(true)
	h.devs[h.lostNS] = gone
	return h
}

// crashAndLose writes and flushes a volume of geometry g, overwrites part
// of every stripe (holeWorkload), crashes it keeping a random half of the
// unflushed blocks (seed), loses namespace lost and recovers.
func crashAndLose(t *testing.T, g layout.Geometry, lost int, seed int64) *hole {
	ctx := context.Background()
	h := crashWithLost(t, g, lost, seed)
	r := h.r
	r.reopen(t, h.devs)
	if seed%2 == 0 { // known down, or found down by the recovery
		if _, err := r.vol.namespace(ctx, h.lostNS); err != nil {
			t.Fatal(err)
		}
		r.vol.SetNamespaceUp(h.lostNS, false)
	}
	if _, err := r.vol.Recover(ctx); err != nil {
		t.Fatalf("recover: %v", err)
	}
	return h
}

// check fails the test at the first block the volume gets wrong.
func (h *hole) check(t *testing.T) {
	if bad, corrupt := h.violations(t); len(bad) > 0 {
		t.Fatalf("%s (and %d more)", bad[0], len(bad)-1)
	} else if corrupt > 0 {
		t.Logf("%d blocks written in flight on the lost namespace read as corrupt", corrupt)
	}
}

// violations reads every block of the volume and checks it against old
// and may: a block not written since the flush must read as it was then;
// one written since reads its old or a new value, or fails with class
// ErrCorrupt when it is on the lost namespace. It returns what was wrong
// and how many blocks read as corrupt, as allowed.
func (h *hole) violations(t *testing.T) (bad []string, corrupt int) {
	ctx := context.Background()
	got := make([]byte, 4096)
	for blk := int64(0); blk < int64(len(h.old))/4096; blk++ {
		err := h.r.vol.ReadAt(ctx, got, blk*4096)
		vals, written := h.may[blk]
		switch {
		case err != nil && written && errors.Is(err, blockdev.ErrCorrupt) && shardNS(t, h.r, blk*4096) == h.lostNS:
			corrupt++
		case err != nil:
			bad = append(bad, fmt.Sprintf("block %d (written since the flush: %v): read: %v", blk, written, err))
		case !written && !bytes.Equal(got, h.old[blk*4096:(blk+1)*4096]):
			bad = append(bad, fmt.Sprintf("block %d, acknowledged and flushed before the crash, reads other bytes after the crash and the loss of %s", blk, h.lostNS))
		case written && !oneOf(got, vals):
			bad = append(bad, fmt.Sprintf("block %d, written since the flush, reads neither its old nor a new value", blk))
		}
	}
	return bad, corrupt
}

// TestWriteHoleWithoutLog runs the crash test's scenario on volumes of
// formats 1 and 2, which have no write log: they are not protected, and
// the check must see it (acknowledged blocks read wrong bytes, or fail
// as corrupt), or it could not see the hole in format 3 either.
func TestWriteHoleWithoutLog(t *testing.T) {
	for _, csum := range []bool{false, true} {
		g := pplLayouts[0]
		g.Log, g.Checksums = false, csum
		wrong := 0
		for lost := 0; lost < g.N(); lost++ {
			h := crashAndLose(t, g, lost, 2)
			bad, _ := h.violations(t)
			wrong += len(bad)
		}
		if wrong == 0 {
			t.Errorf("%v: a crash mid-write and a lost namespace left every acknowledged block right without a write log", g)
		}
		t.Logf("%v: %d blocks wrong or unreadable over %d lost namespaces", g, wrong, g.N())
	}
}

func oneOf(b []byte, vals [][]byte) bool {
	for _, v := range vals {
		if bytes.Equal(b, v) {
			return true
		}
	}
	return false
}

// TestFormat2RecoversWithoutLog: a volume of the previous format (2:
// checksums, no write log) opens and recovers with this code as before:
// its slots keep their layout (no log area), a crash without a lost shard
// recovers every flushed byte, and with a namespace lost its dirty
// segments stay dirty (it has no protection against the write hole) and
// recovery says so instead of failing.
func TestFormat2RecoversWithoutLog(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 3, M: 1, Chunk: 8 << 10, SlotSize: 256 << 10, Checksums: true}
	if g.LogArea() != 0 || g.DataEnd() != g.SlotSize-g.ChecksumArea() {
		t.Fatalf("format 2 layout changed: data end %d, log area %d", g.DataEnd(), g.LogArea())
	}
	for _, lose := range []bool{false, true} {
		r := newRig(t, g, 2*g.SegmentData(), rigOptions{crashable: true})
		old := testutil.Pattern(int(2*g.SegmentData()), 3)
		mustWriteFlushed(t, r.vol, old, 0)
		if err := r.vol.WriteAt(ctx, testutil.Pattern(4096, 9), 4096); err != nil {
			t.Fatal(err)
		}
		devs := r.crash(t, ctx, nil)
		if lose {
			gone := faultdev.New(devs[r.names[0]], 1)
			gone.SetDown(true)
			devs[r.names[0]] = gone
		}
		r.reopen(t, devs)
		n, err := r.vol.Recover(ctx)
		if err != nil {
			t.Fatalf("recover (lost namespace: %v): %v", lose, err)
		}
		if dirty, _ := r.dirty.Dirty(ctx); lose == (len(dirty) == 0) {
			t.Fatalf("lost namespace %v: %d segments recovered, %v still dirty", lose, n, dirty)
		}
		got := mustRead(t, r.vol, 8192, len(old)-8192) // the crash dropped the unflushed block
		mustEqual(t, "format 2 volume after a crash", got, old[8192:])
	}
}

// TestLogRecordRoundTrip encodes a record and decodes it back; a flipped
// bit anywhere in it makes it invalid.
func TestLogRecordRoundTrip(t *testing.T) {
	g := pplLayouts[1]
	rec := logRecord{seq: logSeq{7, 9}, tail: logSeq{7, 3}, seg: 2, stripe: 5, r0: 1,
		touched: []uint32{0b0001, 0b1111, 0}, sums: make([][2]uint32, 3*g.K), pp: [][]byte{testutil.Pattern(4096, 1), nil, nil}}
	for i := range rec.sums {
		rec.sums[i] = [2]uint32{uint32(i), uint32(100 + i)}
	}
	buf := rec.encode(g)
	if len(buf) != 2*4096 {
		t.Fatalf("record of %d bytes, want a header block and one partial-parity block", len(buf))
	}
	got, n, ok := decodeRecord(g, append(buf, make([]byte, 4096)...))
	if !ok || n != 2 || got.seq != rec.seq || got.tail != rec.tail || got.stripe != 5 || got.r0 != 1 ||
		fmt.Sprint(got.touched, got.sums) != fmt.Sprint(rec.touched, rec.sums) || !bytes.Equal(got.pp[0], rec.pp[0]) || got.pp[1] != nil {
		t.Fatalf("decoded %+v ok=%v n=%d, want %+v", got, ok, n, rec)
	}
	for _, bit := range []int{3, 8*20 + 1, 8*60 + 2, 8*100 + 5, 8*4096 + 17} {
		bad := bytes.Clone(buf)
		bad[bit/8] ^= 1 << (bit % 8)
		if _, _, ok := decodeRecord(g, bad); ok {
			t.Errorf("bit %d flipped: record still decodes", bit)
		}
	}
}

// TestWriteHoleZeroRowOfMixedVersions is the case the write-hole property
// found: on 3+1, a chunk flushed on data shard 0 (the rest of the stripe
// never written, zeros), then the same bytes written to data shard 1
// without a flush, so the new parity is zeros (the two equal chunks
// cancel). The crash keeps the new parity and drops the new data of shard
// 1; shard 0 is lost. Every surviving block of the stripe reads zeros, but
// they are on two versions: shard 0 must still read the bytes flushed
// there, not zeros.
func TestWriteHoleZeroRowOfMixedVersions(t *testing.T) {
	ctx := context.Background()
	g := pplLayouts[0]
	r := newRig(t, g, g.SegmentData(), rigOptions{crashable: true})
	a := testutil.Pattern(int(g.Chunk), 7)
	if err := r.vol.WriteAt(ctx, a, 0); err != nil { // stripe 0, data shard 0
		t.Fatal(err)
	}
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.vol.WriteAt(ctx, a, g.Chunk); err != nil { // stripe 0, data shard 1
		t.Fatal(err)
	}
	parity := make([]byte, g.Chunk)
	refs, _, _ := r.alloc.Lookup(ctx, 0)
	pi := g.SlotOf(0, g.K)
	if err := r.mems[r.index(refs[pi].NS)].ReadAt(ctx, parity, refs[pi].Slot*g.SlotSize); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(parity, make([]byte, g.Chunk)) {
		t.Fatal("setup: the parity of two equal chunks and zeros is not zeros")
	}
	// The parity's namespace wrote its cache back; the others kept nothing
	// unflushed.
	crashed := r.crash(t, ctx, func(i int) bool { return i == r.index(refs[pi].NS) })
	r.recoverLosing(t, crashed, refs, 0)
	mustEqual(t, "data shard 0, flushed before the crash, after losing its slot", mustRead(t, r.vol, 0, int(g.Chunk)), a)
}

// TestWriteHoleZeroingAcknowledged: an acknowledged trim of a whole
// stripe with no record of an earlier write left in the stripe's ring
// (flushed, and the ring written round since), then a crash in the middle
// of the next Flush: the data shards' trims and checksum pages reached
// their disks, the parity's did not, and data shard 0 is lost. The
// survivors agree with their checksums but are on two versions; shard 0
// must read its flushed bytes, zeros, or fail as corrupt, never the
// reconstruction of the two.
func TestWriteHoleZeroingAcknowledged(t *testing.T) {
	ctx := context.Background()
	g := pplLayouts[0]
	r := newRig(t, g, g.SegmentData(), rigOptions{crashable: true})
	d := testutil.Pattern(int(g.StripeData()), 3)
	mustWriteFlushed(t, r.vol, d, 0)
	// Stripe 4 has its parity in stripe 0's parity slot: its records
	// overwrite the ring, stripe 0's among them.
	for i := 0; i < 4*int(g.LogArea()/4096); i++ {
		if err := r.vol.WriteAt(ctx, testutil.Pattern(4096, byte(i)), 4*g.StripeData()); err != nil {
			t.Fatal(err)
		}
		if err := r.vol.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.vol.Trim(ctx, 0, g.StripeData()); err != nil {
		t.Fatal(err)
	}
	if err := r.vol.storeSums(ctx, nil); err != nil { // the Flush's first step
		t.Fatal(err)
	}
	refs, _, _ := r.alloc.Lookup(ctx, 0)
	crashed := r.crash(t, ctx, func(i int) bool { return i != r.index(refs[g.SlotOf(0, g.K)].NS) })
	r.recoverLosing(t, crashed, refs, 0)
	got := make([]byte, g.Chunk)
	err := r.vol.ReadAt(ctx, got, 0)
	switch {
	case err != nil && !errors.Is(err, blockdev.ErrCorrupt):
		t.Fatalf("reading data shard 0: %v", err)
	case err == nil && !bytes.Equal(got, d[:g.Chunk]) && !bytes.Equal(got, make([]byte, g.Chunk)):
		t.Fatal("data shard 0, trimmed and lost, reads bytes never written there")
	}
}

// TestWriteHoleZeroedAfterRecord: a stripe written twice (the second time
// in a flushed epoch whose record is still in the ring), then trimmed and
// flushed. With data shard 0 lost after a crash, every survivor reads
// zeros: shard 0 reads zeros too (the trim's record allows them), not
// Corrupt (the older record alone does not).
func TestWriteHoleZeroedAfterRecord(t *testing.T) {
	ctx := context.Background()
	g := pplLayouts[0]
	r := newRig(t, g, g.SegmentData(), rigOptions{crashable: true})
	for i, op := range []func() error{
		func() error { return r.vol.WriteAt(ctx, testutil.Pattern(int(g.StripeData()), 3), 0) },
		r.flushFunc(ctx),
		func() error { return r.vol.WriteAt(ctx, testutil.Pattern(int(g.StripeData()), 4), 0) },
		r.flushFunc(ctx),
		func() error { return r.vol.Trim(ctx, 0, g.StripeData()) },
		r.flushFunc(ctx),
	} {
		if err := op(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	refs, _, _ := r.alloc.Lookup(ctx, 0)
	crashed := r.crash(t, ctx, nil)
	if err := r.dirty.MarkDirty(ctx, 0); err != nil { // as a crash before Clean leaves it
		t.Fatal(err)
	}
	r.recoverLosing(t, crashed, refs, 0)
	mustEqual(t, "trimmed stripe after losing a data shard", mustRead(t, r.vol, 0, int(g.StripeData())), make([]byte, g.StripeData()))
}

// recoverLosing opens the volume anew over crashed with the slots of
// segment 0 (refs) holding the given shards of stripe 0 marked stale, as
// after losing their namespaces in the crash, and recovers it.
func (r *rig) recoverLosing(t tb, crashed DeviceMap, refs []SlotRef, shards ...int) {
	t.Helper()
	ctx := context.Background()
	for _, sh := range shards {
		i := r.g.SlotOf(0, sh)
		if err := r.stale.MarkStale(ctx, StaleSlot{Segment: 0, Slot: i, Ref: refs[i]}); err != nil {
			t.Fatal(err)
		}
	}
	r.reopen(t, crashed)
	if _, err := r.vol.Recover(ctx); err != nil {
		t.Fatalf("recover: %v", err)
	}
}

func (r *rig) flushFunc(ctx context.Context) func() error {
	return func() error { return r.vol.Flush(ctx) }
}

// TestWriteHoleTwoLostVersions: on 4+2, stripe 0 flushed with A, then
// rewritten whole with B and the crash in the middle of the next Flush:
// every checksum page landed, the data shards 0 and 1 and the first
// parity kept B, the second parity kept A, and data shards 2 and 3 are
// lost. Each survivor matches its checksum, but together they rebuild
// neither version: the lost shards must read A, B or fail as corrupt.
func TestWriteHoleTwoLostVersions(t *testing.T) {
	ctx := context.Background()
	g := pplLayouts[1]
	r := newRig(t, g, g.SegmentData(), rigOptions{crashable: true})
	a, b := testutil.Pattern(int(g.StripeData()), 1), testutil.Pattern(int(g.StripeData()), 2)
	mustWriteFlushed(t, r.vol, a, 0)
	if err := r.vol.WriteAt(ctx, b, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.vol.storeSums(ctx, nil); err != nil { // the Flush's first step
		t.Fatal(err)
	}
	refs, _, _ := r.alloc.Lookup(ctx, 0)
	crashed := r.crash(t, ctx, func(i int) bool { return i != r.index(refs[g.SlotOf(0, g.K+1)].NS) })
	r.recoverLosing(t, crashed, refs, 2, 3)
	got := make([]byte, 4096)
	for off := 2 * g.Chunk; off < 4*g.Chunk; off += 4096 {
		err := r.vol.ReadAt(ctx, got, off)
		switch {
		case err != nil && !errors.Is(err, blockdev.ErrCorrupt):
			t.Fatalf("reading %d: %v", off, err)
		case err == nil && !bytes.Equal(got, a[off:off+4096]) && !bytes.Equal(got, b[off:off+4096]):
			t.Fatalf("block at %d, on a lost shard, reads bytes never written there", off)
		}
	}
}

// TestFreshSlotTrimDurable: a slot a move left behind (released holding
// the data it had) is allocated to a new segment; the owner crashes
// before any flush. The new segment's blocks never written must read
// zeros, not the old segment's bytes: the trim of a fresh slot is made
// durable before the segment is used.
func TestFreshSlotTrimDurable(t *testing.T) {
	ctx := context.Background()
	g := pplLayouts[0]
	r := newRig(t, g, 2*g.SegmentData(), rigOptions{crashable: true, namespaces: g.N() + 1})
	if err := r.vol.WriteAt(ctx, testutil.Pattern(int(g.SegmentData()), 9), 0); err != nil {
		t.Fatal(err)
	}
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	slots, _, _ := r.alloc.Lookup(ctx, 0)
	to := freeSlotBeside(t, r, slots)
	err := r.vol.MoveSlot(ctx, 0, 0, to, MoveOptions{Commit: func(ctx context.Context) error { return r.alloc.Replace(ctx, 0, 0, to) }})
	if err != nil {
		t.Fatal(err)
	}
	r.alloc.Release(slots[0])
	one := testutil.Pattern(4096, 3)
	if err := r.vol.WriteAt(ctx, one, g.SegmentData()); err != nil { // allocates segment 1
		t.Fatal(err)
	}
	if refs, _, _ := r.alloc.Lookup(ctx, 1); !slices.Contains(refs, slots[0]) {
		t.Fatalf("setup: segment 1 got %v, not the slot released %v", refs, slots[0])
	}
	crashed := r.crash(t, ctx, nil)
	r.reopen(t, crashed)
	if _, err := r.vol.Recover(ctx); err != nil {
		t.Fatalf("recover: %v", err)
	}
	got := mustRead(t, r.vol, g.SegmentData(), int(g.SegmentData()))
	for b := int64(0); b < g.SegmentData()/4096; b++ {
		blk := got[b*4096 : (b+1)*4096]
		if !bytes.Equal(blk, make([]byte, 4096)) && (b != 0 || !bytes.Equal(blk, one)) {
			t.Fatalf("segment 1 block %d reads bytes never written to the segment", b)
		}
	}
}

// TestFirstRowCodec: the codec the write log computes partial parity
// with gives the first parity row of the volume's codec, for every
// K+M (pure Go and SIMD); without parity there is none, and a volume with
// a write log but no parity opens and writes (its log has no ring).
func TestFirstRowCodec(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, simd := range []bool{true, false} {
		for k := 1; k <= 8; k++ {
			for m := 0; m <= 4; m++ {
				opts := []ec.Option{ec.WithSIMD(simd)}
				codec, err := ec.New(k, m, opts...)
				if err != nil {
					t.Fatal(err)
				}
				row0, err := firstRowCodec(codec, opts)
				if err != nil || (m == 0) != (row0 == nil) {
					t.Fatalf("%d+%d simd=%v: %v, %v", k, m, simd, row0, err)
				}
				if m == 0 {
					continue
				}
				full, one := make([][]byte, k+m), make([][]byte, k+1)
				for i := range full {
					full[i] = make([]byte, 4096)
					if i < k {
						rng.Read(full[i])
						one[i] = full[i]
					}
				}
				one[k] = make([]byte, 4096)
				if err := codec.Encode(full); err != nil {
					t.Fatal(err)
				}
				if err := row0.Encode(one); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(one[k], full[k]) {
					t.Fatalf("%d+%d simd=%v: the first-row codec's parity differs from the first parity row", k, m, simd)
				}
			}
		}
	}
	g := layout.Geometry{K: 2, M: 0, Chunk: 8 << 10, SlotSize: 256 << 10, Checksums: true, Log: true}
	v := newRig(t, g, 256<<10, rigOptions{}).vol
	p := testutil.Pattern(4096, 1)
	if err := v.WriteAt(context.Background(), p, 4096); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, v, 4096, 4096); !bytes.Equal(got, p) {
		t.Fatal("a write to a volume with a write log and no parity reads other bytes")
	}
}
