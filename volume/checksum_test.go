package volume

import (
	"context"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
	"pgregory.net/rapid"
)

// csumLayouts are the checksummed geometries of the bit-flip tests.
var csumLayouts = []layout.Geometry{
	{K: 2, M: 1, Chunk: 8 << 10, SlotSize: 32 << 10, Checksums: true},
	{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 64 << 10, Checksums: true},
	{K: 3, M: 2, Chunk: 4 << 10, SlotSize: 16 << 10, Checksums: true},
	{K: 4, M: 2, Chunk: 8 << 10, SlotSize: 32 << 10, Checksums: true, Seed: 0x5eed}, // format 4
}

// flipKey names one block of one shard: the unit a checksum covers.
type flipKey struct {
	seg, stripe int64
	shard       int
	row         int64
}

// rowKey names one row: the same block of every shard of a stripe.
type rowKey struct{ seg, stripe, row int64 }

// TestPropertyBitFlips writes a volume, flips random bits in random blocks
// (data or checksum) of random shards behind it, reopens it, and checks:
// a block in a row with at most M bad shards reads back as written; one on
// a bad shard of a row with more fails with class ErrCorrupt; no read ever
// returns other bytes; and after a scrub every healable block is healed (a
// second scrub of a fresh open finds only the unhealable ones). It runs
// -rapid.checks cases per layout, or -volume.soak (make soak-props).
func TestPropertyBitFlips(t *testing.T) {
	for _, g := range csumLayouts {
		t.Run(g.String(), func(t *testing.T) {
			checkProperty(t, 1, func(rt *rapid.T) { runBitFlips(rt, g) })
		})
	}
}

func runBitFlips(t *rapid.T, g layout.Geometry) {
	ctx := context.Background()
	size := 2 * g.SegmentData()
	r := newRig(t, g, size, rigOptions{crashable: true})
	want := testutil.Pattern(int(size), rapid.Byte().Draw(t, "seed"))
	mustWriteFlushed(t, r.vol, want, 0)
	bad := map[flipKey]bool{}
	rows := map[rowKey]int{}
	for n := rapid.IntRange(1, 12).Draw(t, "flips"); n > 0; n-- {
		k := flipKey{
			seg:    rapid.Int64Range(0, 1).Draw(t, "seg"),
			stripe: rapid.Int64Range(0, g.StripesPerSegment()-1).Draw(t, "stripe"),
			shard:  rapid.IntRange(0, g.N()-1).Draw(t, "shard"),
			row:    rapid.Int64Range(0, g.BlocksPerChunk()-1).Draw(t, "row"),
		}
		if bad[k] {
			continue // a second flip could undo the first
		}
		flipBit(t, r, k, rapid.Bool().Draw(t, "in-checksum"), rapid.IntRange(0, 8*4096-1).Draw(t, "bit"))
		bad[k] = true
		rows[rowKey{k.seg, k.stripe, k.row}]++
	}
	restart(t, r)
	for off := int64(0); off < size; off += 4096 {
		checkBlock(t, r, off, want[off:off+4096], bad, rows)
	}
	if _, err := r.vol.Scrub(ctx, 0, 1, nil); err != nil {
		t.Fatalf("scrub: %v", err)
	}
	if st := r.vol.ChecksumStats(); st.Mismatches == 0 {
		t.Fatalf("%d blocks flipped, none found: %+v", len(bad), st)
	}
	restart(t, r)
	if _, err := r.vol.Scrub(ctx, 0, 1, nil); err != nil {
		t.Fatalf("second scrub: %v", err)
	}
	unhealable := 0
	for k := range bad {
		if rows[rowKey{k.seg, k.stripe, k.row}] > g.M {
			unhealable++
		}
	}
	if st := r.vol.ChecksumStats(); st.Mismatches != int64(unhealable) || st.Healed != 0 {
		t.Fatalf("second scrub found %+v; want %d unhealable blocks and nothing else", st, unhealable)
	}
}

// checkBlock reads the 4 KiB block at off and checks it against want and
// the flips.
func checkBlock(t *rapid.T, r *rig, off int64, want []byte, bad map[flipKey]bool, rows map[rowKey]int) {
	g := r.g
	seg, in := off/g.SegmentData(), off%g.SegmentData()
	k := flipKey{seg: seg, stripe: in / g.StripeData(), shard: int(in % g.StripeData() / g.Chunk), row: in % g.Chunk / 4096}
	got := make([]byte, 4096)
	err := r.vol.ReadAt(context.Background(), got, off)
	corrupt := bad[k] && rows[rowKey{k.seg, k.stripe, k.row}] > g.M
	switch {
	case corrupt && !errors.Is(err, blockdev.ErrCorrupt):
		t.Fatalf("block at %d: %d shards of its row bad, its own among them: read gave %v, want class ErrCorrupt", off, rows[rowKey{k.seg, k.stripe, k.row}], err)
	case !corrupt && err != nil:
		t.Fatalf("block at %d: read: %v", off, err)
	case !corrupt:
		mustEqual(t, "block read after bit flips", got, want)
	}
}

// flipBitT flips bit of block k's data, durably.
func flipBitT(t tb, r *rig, k flipKey, bit int) { flipBit(t, r, k, false, bit) }

// flipBit flips one bit of block k's data or of its checksum, on the
// namespace behind the volume, durably.
func flipBit(t tb, r *rig, k flipKey, inChecksum bool, bit int) {
	ctx := context.Background()
	refs, ok, err := r.alloc.Lookup(ctx, k.seg)
	if err != nil || !ok {
		t.Fatalf("segment %d: lookup: %v %v", k.seg, ok, err)
	}
	ref := refs[r.g.SlotOf(k.stripe, k.shard)]
	at := ref.Slot*r.g.SlotSize + k.stripe*r.g.Chunk + k.row*4096
	if inChecksum {
		at = ref.Slot*r.g.SlotSize + r.g.ChecksumOffset(k.stripe, k.row*4096)
		bit %= 32
	}
	mem := r.mems[r.index(ref.NS)]
	blk := at / 4096 * 4096
	b := make([]byte, 4096)
	if err := mem.ReadAt(ctx, b, blk); err != nil {
		t.Fatal(err)
	}
	b[at-blk+int64(bit/8)] ^= 1 << (bit % 8)
	if err := mem.WriteAt(ctx, b, blk); err != nil {
		t.Fatal(err)
	}
	if err := mem.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// restart flushes the volume (heals are writes like others) and opens it
// anew over crash clones of its namespaces, so no checksum is cached.
func restart(t tb, r *rig) {
	if err := r.vol.Flush(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}
	devs := r.crash(t, context.Background(), nil)
	r.reopen(t, devs)
	r.rebindMems(devs)
}

// TestDeltaWriteVerifiesOldParity flips a bit in a parity block and then
// writes part of the stripe: the read half of the read-modify-write must
// notice and heal the parity first, or the new parity would carry the flip
// (the parity check afterwards fails).
func TestDeltaWriteVerifiesOldParity(t *testing.T) {
	ctx := context.Background()
	g := csumLayouts[1]
	r := newRig(t, g, 2*g.SegmentData(), rigOptions{crashable: true})
	if err := r.vol.WriteAt(ctx, testutil.Pattern(int(g.StripeData()), 1), 0); err != nil {
		t.Fatal(err)
	}
	restart(t, r)
	flipBitT(t, r, flipKey{shard: g.K, row: 1}, 5) // inside the write's span
	if err := r.vol.WriteAt(ctx, testutil.Pattern(4096, 2), 4096); err != nil {
		t.Fatal(err)
	}
	r.checkParity(t)
	if st := r.vol.ChecksumStats(); st.Mismatches != 1 || st.Healed != 1 {
		t.Fatalf("checksum stats %+v, want one mismatch healed", st)
	}
}

// TestFUAWritesChecksumsDurably: a FUA write returns with its checksums
// durable too. The devices crash (losing everything not flushed or FUA)
// right after it, and a fresh open reads the data with no mismatch.
func TestFUAWritesChecksumsDurably(t *testing.T) {
	ctx := context.Background()
	g := csumLayouts[0]
	r := newRig(t, g, 2*g.SegmentData(), rigOptions{crashable: true})
	want := testutil.Pattern(int(g.StripeData()), 7)
	if err := r.vol.WriteAt(ctx, make([]byte, 4096), 0); err != nil { // allocation's trims, flushed
		t.Fatal(err)
	}
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.vol.WriteAtFUA(ctx, want, 0); err != nil {
		t.Fatal(err)
	}
	devs := r.crash(t, ctx, nil)
	r.reopen(t, devs)
	mustEqual(t, "FUA write after a crash", mustRead(t, r.vol, 0, len(want)), want)
	if st := r.vol.ChecksumStats(); st != (ChecksumStats{}) {
		t.Fatalf("after a crash behind a FUA write: %+v, want no mismatch", st)
	}
}

// TestBlockSum pins the on-disk checksum: crc32c (hash/crc32's Castagnoli)
// of the block xor that of a zero block, so a zero block's is zero.
func TestBlockSum(t *testing.T) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	zero := make([]byte, layout.ChecksumBlock)
	if got := crc32.Checksum(zero, tab); got != zeroSum {
		t.Fatalf("zeroSum %#x, crc32c of a zero block %#x", uint32(zeroSum), got)
	}
	b := testutil.Pattern(layout.ChecksumBlock, 7)
	if got, want := blockSum(b), crc32.Checksum(b, tab)^crc32.Checksum(zero, tab); got != want || blockSum(zero) != 0 {
		t.Fatalf("blockSum %#x, want %#x (zero block %#x)", got, want, blockSum(zero))
	}
}

// TestChecksumFoundBy: the Checksum listener says what found a bad block:
// a foreground read, or a scrub.
func TestChecksumFoundBy(t *testing.T) {
	ctx := context.Background()
	g := csumLayouts[1]
	r := newRig(t, g, g.SegmentData(), rigOptions{crashable: true})
	if err := r.vol.WriteAt(ctx, testutil.Pattern(int(2*g.StripeData()), 1), 0); err != nil {
		t.Fatal(err)
	}
	restart(t, r)
	var got []ChecksumInfo
	r.vol.ev.Checksum = func(c ChecksumInfo) { got = append(got, c) }
	flipBitT(t, r, flipKey{stripe: 0, shard: 1, row: 2}, 3)
	flipBitT(t, r, flipKey{stripe: 1, shard: 0, row: 0}, 9)
	if err := r.vol.ReadAt(ctx, make([]byte, g.StripeData()), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.vol.Scrub(ctx, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].FoundBy != "read" || got[0].Stripe != 0 || got[1].FoundBy != "scrub" || got[1].Stripe != 1 {
		t.Fatalf("listener got %+v, want stripe 0 found by read, stripe 1 by scrub", got)
	}
}
