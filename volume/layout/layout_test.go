package layout

import (
	"errors"
	"testing"

	"pgregory.net/rapid"
)

func TestValidate(t *testing.T) {
	ok := Geometry{K: 4, M: 2, Chunk: 128 << 10, SlotSize: 1 << 30}
	cases := []struct {
		name string
		g    Geometry
		bad  bool
	}{
		{"4+2", ok, false},
		{"1+0", Geometry{K: 1, M: 0, Chunk: 4096, SlotSize: 4096}, false},
		{"16+4", Geometry{K: 16, M: 4, Chunk: 4 << 20, SlotSize: 8 << 20}, false},
		{"k0", Geometry{K: 0, M: 2, Chunk: 4096, SlotSize: 4096}, true},
		{"m negative", Geometry{K: 2, M: -1, Chunk: 4096, SlotSize: 4096}, true},
		{"too wide", Geometry{K: 30, M: 3, Chunk: 4096, SlotSize: 4096}, true},
		{"chunk small", Geometry{K: 2, M: 1, Chunk: 2048, SlotSize: 4096}, true},
		{"chunk big", Geometry{K: 2, M: 1, Chunk: 8 << 20, SlotSize: 8 << 20}, true},
		{"chunk not pow2", Geometry{K: 2, M: 1, Chunk: 12288, SlotSize: 12288}, true},
		{"slot not multiple", Geometry{K: 2, M: 1, Chunk: 8192, SlotSize: 12288}, true},
		{"slot zero", Geometry{K: 2, M: 1, Chunk: 8192}, true},
	}
	for _, c := range cases {
		err := c.g.Validate()
		if (err != nil) != c.bad {
			t.Errorf("%s: Validate() = %v, want error %v", c.name, err, c.bad)
		}
		if err != nil && !errors.Is(err, ErrGeometry) {
			t.Errorf("%s: error %v is not ErrGeometry", c.name, err)
		}
	}
}

func TestDerived(t *testing.T) {
	g := Geometry{K: 4, M: 2, Chunk: 128 << 10, SlotSize: 1 << 30}
	if got := g.StripeData(); got != 512<<10 {
		t.Errorf("StripeData = %d", got)
	}
	if got := g.StripesPerSegment(); got != 8192 {
		t.Errorf("StripesPerSegment = %d", got)
	}
	if got := g.SegmentData(); got != 4<<30 {
		t.Errorf("SegmentData = %d", got)
	}
	if got := g.Segments(4<<30 + 1); got != 2 {
		t.Errorf("Segments = %d", got)
	}
	if got := g.String(); got != "4+2/131072/1073741824" {
		t.Errorf("String = %q", got)
	}
}

// TestSlotOfTable pins the rotation for a 2+1 layout: stripe t keeps data 0 in
// slot t mod 3.
func TestSlotOfTable(t *testing.T) {
	g := Geometry{K: 2, M: 1, Chunk: 4096, SlotSize: 4096 * 8}
	want := [][]int{ // stripe -> slot of shard 0, 1, parity
		{0, 1, 2},
		{1, 2, 0},
		{2, 0, 1},
		{0, 1, 2},
	}
	for st, slots := range want {
		for s, slot := range slots {
			if got := g.SlotOf(int64(st), s); got != slot {
				t.Errorf("SlotOf(%d, %d) = %d, want %d", st, s, got, slot)
			}
			if got := g.ShardIn(int64(st), slot); got != s {
				t.Errorf("ShardIn(%d, %d) = %d, want %d", st, slot, got, s)
			}
		}
	}
}

func TestSplitTable(t *testing.T) {
	g := Geometry{K: 2, M: 1, Chunk: 8192, SlotSize: 8192 * 2} // segment data 32 KiB
	got := g.Split(12288, 24576)                               // 12K..36K
	want := []StripeIO{
		{ID: StripeID{0, 0}, Pieces: []Piece{{Shard: 1, Off: 4096, Len: 4096, Buf: 0}}},
		{ID: StripeID{0, 1}, Pieces: []Piece{{Shard: 0, Off: 0, Len: 8192, Buf: 4096}, {Shard: 1, Off: 0, Len: 8192, Buf: 12288}}},
		{ID: StripeID{1, 0}, Pieces: []Piece{{Shard: 0, Off: 0, Len: 4096, Buf: 20480}}},
	}
	if len(got) != len(want) {
		t.Fatalf("Split = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].ID != want[i].ID || len(got[i].Pieces) != len(want[i].Pieces) {
			t.Fatalf("stripe %d: %+v, want %+v", i, got[i], want[i])
		}
		for j := range want[i].Pieces {
			if got[i].Pieces[j] != want[i].Pieces[j] {
				t.Errorf("stripe %d piece %d: %+v, want %+v", i, j, got[i].Pieces[j], want[i].Pieces[j])
			}
		}
	}
	if !got[1].Full(g) || got[0].Full(g) {
		t.Errorf("Full wrong: %v %v", got[0].Full(g), got[1].Full(g))
	}
	if lo, hi := got[0].Span(); lo != 4096 || hi != 8192 {
		t.Errorf("Span = %d,%d", lo, hi)
	}
}

// naiveLocate walks the volume block by block in logical order, the way a
// person would lay the data out by hand, and returns where the block at off
// lives: segment, slot and byte offset in the slot.
func naiveLocate(g Geometry, off int64) (seg int64, slot int, slotOff int64) {
	var pos int64
	for seg = 0; ; seg++ {
		for st := int64(0); st < g.SlotSize/g.Chunk; st++ {
			for d := 0; d < g.K; d++ {
				if off < pos+g.Chunk {
					return seg, int((int64(d) + st) % int64(g.K+g.M)), st*g.Chunk + off - pos
				}
				pos += g.Chunk
			}
		}
	}
}

func genGeometry(t *rapid.T) Geometry {
	k := rapid.IntRange(1, 16).Draw(t, "k")
	m := rapid.IntRange(0, 4).Draw(t, "m")
	chunk := int64(4096) << rapid.IntRange(0, 3).Draw(t, "chunkShift")
	slot := chunk * int64(rapid.IntRange(1, 6).Draw(t, "stripes"))
	return Geometry{K: k, M: m, Chunk: chunk, SlotSize: slot}
}

// TestSplitMatchesNaive checks Split, SlotOf and SlotOffset against the naive
// walk for random geometries and requests, one 4 KiB block at a time.
func TestSplitMatchesNaive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genGeometry(t)
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
		blocks := g.SegmentData() * 3 / 4096
		first := rapid.Int64Range(0, blocks-1).Draw(t, "first")
		count := rapid.Int64Range(0, blocks-first).Draw(t, "count")
		var covered int64
		for _, sio := range g.Split(first*4096, count*4096) {
			for _, p := range sio.Pieces {
				if p.Buf != covered {
					t.Fatalf("piece %+v not contiguous at %d", p, covered)
				}
				for b := int64(0); b < p.Len; b += 4096 {
					seg, slot, slotOff := naiveLocate(g, first*4096+p.Buf+b)
					gotSlot := g.SlotOf(sio.ID.Stripe, p.Shard)
					gotOff := g.SlotOffset(sio.ID) + p.Off + b
					if seg != sio.ID.Segment || slot != gotSlot || slotOff != gotOff {
						t.Fatalf("block %d: got seg %d slot %d off %d, naive %d %d %d",
							first+(p.Buf+b)/4096, sio.ID.Segment, gotSlot, gotOff, seg, slot, slotOff)
					}
				}
				covered += p.Len
			}
		}
		if covered != count*4096 {
			t.Fatalf("covered %d bytes of %d", covered, count*4096)
		}
	})
}

// TestRotation checks that every stripe puts its K+M shards in K+M distinct
// slots and that over K+M stripes every slot holds parity exactly M times.
func TestRotation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genGeometry(t)
		parity := make([]int, g.N())
		for st := int64(0); st < int64(g.N()); st++ {
			seen := make([]bool, g.N())
			for s := 0; s < g.N(); s++ {
				slot := g.SlotOf(st, s)
				if seen[slot] {
					t.Fatalf("stripe %d: slot %d used twice", st, slot)
				}
				seen[slot] = true
				if g.ShardIn(st, slot) != s {
					t.Fatalf("ShardIn does not invert SlotOf")
				}
				if s >= g.K {
					parity[slot]++
				}
			}
		}
		for slot, n := range parity {
			if n != g.M {
				t.Fatalf("slot %d holds parity %d times in %d stripes, want %d", slot, n, g.N(), g.M)
			}
		}
	})
}

// TestChecksumArea: with Checksums, the stripes and the checksum area of a
// slot never overlap, every block of every stripe has a checksum inside
// the slot, and the area costs at most a chunk more than 1/1024 of the slot.
func TestChecksumArea(t *testing.T) {
	for _, g := range []Geometry{
		{K: 4, M: 2, Chunk: 128 << 10, SlotSize: 1 << 30, Checksums: true},
		{K: 2, M: 1, Chunk: 4 << 10, SlotSize: 12 << 10, Checksums: true},
		{K: 8, M: 3, Chunk: 4 << 20, SlotSize: 64 << 20, Checksums: true},
		{K: 3, M: 1, Chunk: 8 << 10, SlotSize: 40 << 10, Checksums: true},
	} {
		if err := g.Validate(); err != nil {
			t.Fatalf("%v: %v", g, err)
		}
		last := g.StripesPerSegment() - 1
		end := g.ChecksumOffset(last, g.Chunk-ChecksumBlock) + ChecksumSize
		switch {
		case (last+1)*g.Chunk != g.DataEnd():
			t.Errorf("%v: %d stripes end at %d, data end %d", g, last+1, (last+1)*g.Chunk, g.DataEnd())
		case g.ChecksumOffset(0, 0) != g.DataEnd() || end > g.SlotSize:
			t.Errorf("%v: checksums span [%d, %d) of a %d-byte slot, data ends at %d", g, g.ChecksumOffset(0, 0), end, g.SlotSize, g.DataEnd())
		case g.ChecksumArea() > g.SlotSize/1024+g.Chunk:
			t.Errorf("%v: checksum area %d bytes", g, g.ChecksumArea())
		}
	}
	if g := (Geometry{K: 1, M: 0, Chunk: 4 << 10, SlotSize: 4 << 10, Checksums: true}); g.Validate() == nil {
		t.Errorf("%v: a slot of one chunk has no room beside its checksums, yet it validates", g)
	}
	plain := Geometry{K: 4, M: 2, Chunk: 128 << 10, SlotSize: 1 << 30}
	if plain.ChecksumArea() != 0 || plain.StripesPerSegment() != 8192 {
		t.Errorf("%v: format 1 geometry changed: area %d, %d stripes", plain, plain.ChecksumArea(), plain.StripesPerSegment())
	}
}

// TestChecksumTags: with a seed, tags are never zero, differ between the
// slots of a segment for one block (OtherSlot finds which), and vary with
// segment and block; without one they are zero.
func TestChecksumTags(t *testing.T) {
	g := Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 1 << 20, Checksums: true, Seed: 42}
	if g.ChecksumTag(3, 1, 7) == 0 || (Geometry{K: 4, M: 2}).ChecksumTag(3, 1, 7) != 0 {
		t.Fatal("tag zero with a seed, or not zero without")
	}
	seen := map[uint32]bool{}
	for seg := range int64(4) {
		for slot := range g.N() {
			tags := g.SlotTags(seg, slot)
			for block := range int64(64) {
				tag := tags.Of(block)
				if tag == 0 || seen[tag] {
					t.Fatalf("segment %d slot %d block %d: tag %#x zero or repeated", seg, slot, block, tag)
				}
				seen[tag] = true
				for other := range g.N() {
					diff := tag ^ g.ChecksumTag(seg, other, block)
					if tags.Misplaced(diff, g.N()) != (other != slot) {
						t.Fatalf("slot %d block %d: tag of slot %d misplaced=%v", slot, block, other, tags.Misplaced(diff, g.N()))
					}
				}
				if tags.Misplaced(tag^g.ChecksumTag(seg+1, slot, block), g.N()) {
					t.Fatalf("segment %d slot %d block %d: the next segment's tag taken as another slot's", seg, slot, block)
				}
			}
		}
	}
	if err := (Geometry{K: 2, M: 1, Chunk: 4096, SlotSize: 1 << 20, Seed: 1}).Validate(); !errors.Is(err, ErrGeometry) {
		t.Fatalf("seed without checksums: %v", err)
	}
}
