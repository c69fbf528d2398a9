package volume

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// boundLayouts are format 4 geometries: checksums bound to their place
// (Seed), without and with the write log.
var boundLayouts = []layout.Geometry{
	{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 64 << 10, Checksums: true, Seed: 0x5eed},
	{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 512 << 10, Checksums: true, Log: true, Seed: 0x5eed},
}

// slotPlace returns the in-memory namespace behind slot i of segment seg
// and the slot's byte offset in it.
func slotPlace(t tb, r *rig, seg int64, i int) (*blockdev.Mem, int64) {
	t.Helper()
	refs, ok, err := r.alloc.Lookup(context.Background(), seg)
	if err != nil || !ok {
		t.Fatalf("segment %d: lookup: %v %v", seg, ok, err)
	}
	return r.mems[r.index(refs[i].NS)], refs[i].Slot * r.g.SlotSize
}

// overwrite writes b at off of mem durably, behind the volume (restart
// replaces the devices: look mem up after it).
func overwrite(t tb, mem *blockdev.Mem, b []byte, off int64) {
	t.Helper()
	ctx := context.Background()
	if err := mem.WriteAt(ctx, b, off); err != nil {
		t.Fatal(err)
	}
	if err := mem.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// zeroSlot zeroes slot i of segment seg whole: data, checksums and log.
func zeroSlotBehind(t tb, r *rig, seg int64, i int) {
	mem, off := slotPlace(t, r, seg, i)
	overwrite(t, mem, make([]byte, r.g.SlotSize), off)
}

// swapSlots swaps the contents of slots i and j of segment seg, each with
// its checksum area (and log area): every block stays consistent with its
// own checksum.
func swapSlots(t tb, r *rig, seg int64, i, j int) {
	ctx := context.Background()
	mi, oi := slotPlace(t, r, seg, i)
	mj, oj := slotPlace(t, r, seg, j)
	bi, bj := make([]byte, r.g.SlotSize), make([]byte, r.g.SlotSize)
	if err := mi.ReadAt(ctx, bi, oi); err != nil {
		t.Fatal(err)
	}
	if err := mj.ReadAt(ctx, bj, oj); err != nil {
		t.Fatal(err)
	}
	overwrite(t, mi, bj, oi)
	overwrite(t, mj, bi, oj)
}

// damageCases damage one or two slots of segment 0 behind the volume, each
// within M of a 4+2 layout.
var damageCases = []struct {
	name   string
	damage func(t tb, r *rig)
}{
	{"zeroed slot", func(t tb, r *rig) { zeroSlotBehind(t, r, 0, 1) }},
	{"hole", func(t tb, r *rig) {
		// A shard file truncated in the middle of segment 0's slot and
		// extended again: zeros from there to the end of the namespace.
		mem, off := slotPlace(t, r, 0, 2)
		from := off + r.g.SlotSize/4
		overwrite(t, mem, make([]byte, mem.Size()-from), from)
	}},
	{"blank namespace", func(t tb, r *rig) {
		// A blank replacement disk where the namespace of slot 0 was.
		mem, _ := slotPlace(t, r, 0, 0)
		overwrite(t, mem, make([]byte, mem.Size()), 0)
	}},
	{"swapped slots", func(t tb, r *rig) { swapSlots(t, r, 0, 0, 3) }},
}

// readAll reads the volume block by block and checks every block against
// want.
func readAll(t tb, r *rig, want []byte) {
	t.Helper()
	for off := int64(0); off < int64(len(want)); off += 4096 {
		mustEqual(t, "block read after damage", mustRead(t, r.vol, off, 4096), want[off:off+4096])
	}
}

// writeClean writes want from offset 0, flushes and marks every segment
// clean.
func writeClean(t tb, r *rig, want []byte) {
	t.Helper()
	ctx := context.Background()
	if err := r.vol.WriteAt(ctx, want, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.vol.Clean(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestBoundDamageIsRebuilt: a zeroed slot, a hole, a blank namespace and
// two swapped slots of a segment are found by every read (never returned
// as data) and rebuilt from the other shards; a scrub heals what the reads
// did not touch (parity) and leaves nothing for a second scrub. With the
// checksums of formats 2 and 3 the zeros read as data and the swapped
// blocks pass their checks.
func TestBoundDamageIsRebuilt(t *testing.T) {
	ctx := context.Background()
	for _, g := range boundLayouts {
		for _, c := range damageCases {
			t.Run(g.String()+"/"+c.name, func(t *testing.T) {
				size := 2 * g.SegmentData()
				r := newRig(t, g, size, rigOptions{crashable: true})
				want := testutil.Pattern(int(size), 3)
				writeClean(t, r, want)
				c.damage(t, r)
				restart(t, r)
				readAll(t, r, want)
				restart(t, r)
				if _, err := r.vol.Scrub(ctx, 0, 1, nil); err != nil {
					t.Fatal(err)
				}
				if st := r.vol.ChecksumStats(); st.Unhealed != 0 {
					t.Fatalf("scrub after the reads: %+v, want nothing unhealed", st)
				}
				restart(t, r)
				if _, err := r.vol.Scrub(ctx, 0, 1, nil); err != nil {
					t.Fatal(err)
				}
				if st := r.vol.ChecksumStats(); st != (ChecksumStats{}) {
					t.Fatalf("second scrub: %+v, want nothing found", st)
				}
				readAll(t, r, want)
				r.checkParity(t)
			})
		}
	}
}

// TestBoundScrubCounts: a scrub of a volume with one slot zeroed finds
// every block of the slot bad and heals each (formats 2 and 3: none bad,
// and the parity rewritten to match the zeros).
func TestBoundScrubCounts(t *testing.T) {
	ctx := context.Background()
	g := boundLayouts[0]
	r := newRig(t, g, g.SegmentData(), rigOptions{crashable: true})
	want := testutil.Pattern(int(g.SegmentData()), 5)
	writeClean(t, r, want)
	zeroSlotBehind(t, r, 0, 4)
	restart(t, r)
	if _, err := r.vol.Scrub(ctx, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	blocks := g.StripesPerSegment() * g.BlocksPerChunk()
	if st := r.vol.ChecksumStats(); st.Mismatches != blocks || st.Healed != blocks || st.Unhealed != 0 {
		t.Fatalf("scrub of a zeroed slot: %+v, want all %d blocks of the slot bad and healed", st, blocks)
	}
	restart(t, r)
	readAll(t, r, want)
	r.checkParity(t)
}

// TestBoundMoreThanM: with three of six slots zeroed every read returns
// the written data or fails with class ErrCorrupt, a scrub heals nothing
// and rewrites no parity, so once one slot is back (two bad: within M)
// every block reads as written again.
func TestBoundMoreThanM(t *testing.T) {
	ctx := context.Background()
	g := boundLayouts[0]
	r := newRig(t, g, g.SegmentData(), rigOptions{crashable: true})
	want := testutil.Pattern(int(g.SegmentData()), 9)
	writeClean(t, r, want)
	mem, off := slotPlace(t, r, 0, 0)
	saved := make([]byte, g.SlotSize)
	if err := mem.ReadAt(ctx, saved, off); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		zeroSlotBehind(t, r, 0, i)
	}
	restart(t, r)
	corrupt := 0
	for o := int64(0); o < int64(len(want)); o += 4096 {
		got := make([]byte, 4096)
		err := r.vol.ReadAt(ctx, got, o)
		switch {
		case errors.Is(err, blockdev.ErrCorrupt):
			corrupt++
		case err != nil:
			t.Fatalf("read at %d: %v, want the data or class ErrCorrupt", o, err)
		default:
			mustEqual(t, "block read with three slots zeroed", got, want[o:o+4096])
		}
	}
	if corrupt == 0 {
		t.Fatal("three slots of six zeroed, no read failed")
	}
	restart(t, r)
	if _, err := r.vol.Scrub(ctx, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	if st := r.vol.ChecksumStats(); st.Healed != 0 || st.Parity != 0 || st.Unhealed == 0 {
		t.Fatalf("scrub with three slots zeroed: %+v, want unhealed blocks, nothing healed, no parity rewritten", st)
	}
	mem, _ = slotPlace(t, r, 0, 0) // restart replaced the devices
	overwrite(t, mem, saved, off)
	restart(t, r)
	readAll(t, r, want)
}

// TestBoundResyncDamage: after a crash (segments dirty) a zeroed slot or
// two swapped slots are rebuilt by Recover's resync, not kept as torn
// writes with the parity re-encoded from them (which would make the loss
// permanent).
func TestBoundResyncDamage(t *testing.T) {
	ctx := context.Background()
	for _, g := range boundLayouts {
		for _, c := range damageCases {
			t.Run(g.String()+"/"+c.name, func(t *testing.T) {
				size := 2 * g.SegmentData()
				r := newRig(t, g, size, rigOptions{crashable: true})
				want := testutil.Pattern(int(size), 11)
				if err := r.vol.WriteAt(ctx, want, 0); err != nil {
					t.Fatal(err)
				}
				restart(t, r) // flushed, still dirty: as after a crash
				c.damage(t, r)
				restart(t, r)
				if _, err := r.vol.Recover(ctx); err != nil {
					t.Fatalf("recover: %v", err)
				}
				if st := r.vol.ChecksumStats(); st.Torn != 0 {
					t.Fatalf("resync kept %d damaged blocks as torn writes: %+v", st.Torn, st)
				}
				restart(t, r)
				readAll(t, r, want)
				r.checkParity(t)
			})
		}
	}
}

// TestBoundTrimReopen: trimmed and zeroed blocks, and blocks of a segment
// never written, read as zeros after a reopen with no mismatch: a trim
// writes the checksums of zero blocks at their place, and allocation
// writes a fresh slot's whole checksum area.
func TestBoundTrimReopen(t *testing.T) {
	ctx := context.Background()
	for _, g := range boundLayouts {
		t.Run(g.String(), func(t *testing.T) {
			size := 2 * g.SegmentData()
			r := newRig(t, g, size, rigOptions{crashable: true})
			want := make([]byte, size)
			copy(want, testutil.Pattern(int(g.SegmentData()), 13))
			if err := r.vol.WriteAt(ctx, want[:g.SegmentData()], 0); err != nil {
				t.Fatal(err)
			}
			last := g.SegmentData() + g.StripeData() // one block in segment 1
			copy(want[last:last+4096], testutil.Pattern(4096, 17))
			if err := r.vol.WriteAt(ctx, want[last:last+4096], last); err != nil {
				t.Fatal(err)
			}
			zero := func(off, n int64, trim bool) {
				clear(want[off : off+n])
				f := r.vol.WriteZeroes
				if trim {
					f = r.vol.Trim
				}
				if err := f(ctx, off, n); err != nil {
					t.Fatal(err)
				}
			}
			zero(g.StripeData(), 2*g.StripeData(), true)  // whole stripes
			zero(4*g.StripeData()+8192, 4096, true)       // part of a stripe
			zero(5*g.StripeData(), g.StripeData(), false) // write zeroes
			if err := r.vol.Clean(ctx); err != nil {
				t.Fatal(err)
			}
			restart(t, r)
			readAll(t, r, want)
			if _, err := r.vol.Scrub(ctx, 0, 1, nil); err != nil {
				t.Fatal(err)
			}
			if st := r.vol.ChecksumStats(); st != (ChecksumStats{}) {
				t.Fatalf("after trims and a reopen: %+v, want no mismatch", st)
			}
		})
	}
}

// TestBoundAllocationCutShort: a crash after a segment's allocation was
// recorded but before its slots' checksum areas were all written leaves it
// dirty (marked before the allocation) and blank, or blank on some slots
// only; Recover writes it as a segment of zeros, so it reads zeros and
// takes writes.
func TestBoundAllocationCutShort(t *testing.T) {
	for _, g := range boundLayouts {
		for _, inited := range []int{0, 3} {
			t.Run(fmt.Sprintf("%v/%d-of-6-initialised", g, inited), func(t *testing.T) { allocationCutShort(t, g, inited) })
		}
	}
}

func allocationCutShort(t *testing.T, g layout.Geometry, inited int) {
	ctx := context.Background()
	r := newRig(t, g, 2*g.SegmentData(), rigOptions{crashable: true})
	if err := r.dirty.MarkDirty(ctx, 1); err != nil { // as markAllocating
		t.Fatal(err)
	}
	if _, err := r.alloc.Allocate(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if inited > 0 {
		s, err := r.vol.acquire(ctx, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		for i := range inited {
			if err := r.vol.initSums(ctx, s.slots[i]); err != nil {
				t.Fatal(err)
			}
		}
		s.io.RUnlock()
		for _, m := range r.mems {
			if err := m.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	restart(t, r)
	if _, err := r.vol.Recover(ctx); err != nil {
		t.Fatalf("recover: %v", err)
	}
	zeros := make([]byte, g.SegmentData())
	mustEqual(t, "segment allocated before a crash", mustRead(t, r.vol, g.SegmentData(), len(zeros)), zeros)
	b := testutil.Pattern(4096, 21)
	if err := r.vol.WriteAt(ctx, b, g.SegmentData()+4096); err != nil {
		t.Fatal(err)
	}
	restart(t, r)
	mustEqual(t, "write after recovery", mustRead(t, r.vol, g.SegmentData()+4096, 4096), b)
}

// dirtyAtAllocate is an Allocator that records whether the segment was
// marked dirty when Allocate was called.
type dirtyAtAllocate struct {
	*MemAllocator
	dirty  *MemDirtyLog
	marked []bool
}

func (a *dirtyAtAllocate) Allocate(ctx context.Context, seg int64) ([]SlotRef, error) {
	segs, _ := a.dirty.Dirty(ctx)
	a.marked = append(a.marked, len(segs) == 1 && segs[0] == seg)
	return a.MemAllocator.Allocate(ctx, seg)
}

// TestBoundAllocationMarkedDirty: in format 4 a segment is marked dirty
// before its allocation is recorded (TestBoundAllocationCutShort is what
// Recover then does with it).
func TestBoundAllocationMarkedDirty(t *testing.T) {
	ctx := context.Background()
	g := boundLayouts[0]
	r := newRig(t, g, g.SegmentData(), rigOptions{})
	a := &dirtyAtAllocate{MemAllocator: r.alloc, dirty: r.dirty}
	r.vol.alloc = a
	if err := r.vol.WriteAt(ctx, testutil.Pattern(4096, 1), 0); err != nil {
		t.Fatal(err)
	}
	if len(a.marked) != 1 || !a.marked[0] {
		t.Fatalf("allocations %v: want one, with its segment marked dirty first", a.marked)
	}
}
