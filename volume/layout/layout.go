// Package layout is the pure offset arithmetic of a striped, erasure-coded
// volume. It maps logical byte ranges to segments, stripes, shards and byte
// offsets inside slots, and says on which slot of a segment each shard of a
// stripe lives (parity rotates from stripe to stripe).
//
// Terms (see docs/architecture.md): a volume is cut into segments; a segment is K+M slots
// of SlotSize bytes, one per namespace; a stripe is K data chunks and M parity
// chunks of Chunk bytes, one chunk in each slot of the segment at the same slot
// offset. A segment holds SlotSize/Chunk stripes and SegmentData() logical
// bytes.
//
// Shard index s in [0, K+M) names a position in the stripe: 0..K-1 are the
// data chunks in logical order, K..K+M-1 the parity chunks. Stripe t of a
// segment keeps shard s in slot (s + t) mod (K+M), so every slot holds data
// for K of every K+M stripes and sequential reads use every namespace.
//
// A geometry with Checksums keeps a crc32c of every 4 KiB block
// (ChecksumBlock) of the slot in a checksum area at the slot's end: the
// stripes fill the slot up to DataEnd, the area holds ChecksumSize bytes per
// block of every stripe, in stripe order (ChecksumOffset). The area is
// rounded up to whole chunks, so it costs a chunk or about 1/1024 of the
// slot, whichever is more.
//
// A geometry with Log (format 3, which has Checksums too) also ends every
// slot in a write-log area (LogOffset, LogArea) after the checksum area:
// the ring of partial-parity records that closes the write hole (package
// volume, ppl.go). It holds at least 2 records of the largest size
// (LogRecordMax blocks), at least 128 KiB and at least 1/256 of the slot,
// rounded up to whole chunks (4 MiB of a 1 GiB slot: 0.4%).
//
// A geometry with a Seed (format 4, which has Checksums too) binds every
// stored checksum to its place: the value stored for a block is its crc32c
// xor ChecksumTag(segment, slot, block), a tag made from the volume's seed,
// the segment index, the slot index in the segment and the block index in
// the slot, never zero. A block read back from another place (a swapped
// slot, a shifted region) or a blank one (zeros where data and checksums
// were) then fails its check. The namespace is not part of the place: a
// move or rebuild copies a slot to another namespace at the same place.
//
// Everything here is a pure function of its arguments and safe for concurrent
// use.
package layout

import (
	"errors"
	"fmt"
	"math/bits"
)

// Limits of a geometry.
const (
	MinChunk  = 4 << 10
	MaxChunk  = 4 << 20
	MaxShards = 32 // K+M; 16+4 and beyond fit

	// ChecksumBlock is the number of bytes one checksum covers.
	ChecksumBlock = 4 << 10
	// ChecksumSize is the number of bytes of one checksum (crc32c).
	ChecksumSize = 4

	// LogHeaderFixed is the fixed part of a write-log record header; each
	// row (block offset of the chunk) it covers adds LogRowBytes(K).
	LogHeaderFixed = 72
	// logRecordsMin is how many records of the largest size the log area
	// holds at least (a write may wait for the flush that frees one).
	logRecordsMin = 2
	// logBlocksMin is the least size of the log area in blocks (128 KiB).
	logBlocksMin = 32
	// logShare: the log area is at least 1/logShare of the slot.
	logShare = 256
)

// ErrGeometry is the class of every invalid-geometry error.
var ErrGeometry = errors.New("invalid layout geometry")

// Geometry is the layout of one volume.
//
// Invariants (checked by Validate):
//  1. K >= 1, M >= 0, K+M <= MaxShards.
//  2. Chunk is a power of two in [MinChunk, MaxChunk].
//  3. SlotSize is a positive multiple of Chunk.
//  4. With Checksums, the slot holds at least one stripe besides its
//     checksum area (and its log area, with Log).
//  5. Log only with Checksums.
//  6. Seed only with Checksums.
type Geometry struct {
	K, M     int
	Chunk    int64
	SlotSize int64
	// Checksums: every slot ends in a checksum area (format 2 volumes).
	Checksums bool
	// Log: every slot also ends in a write-log area (format 3 volumes).
	Log bool
	// Seed, when not zero, binds stored checksums to their place
	// (ChecksumTag; format 4 volumes): a value unique to the volume, kept
	// in its record. Zero for formats 1 to 3.
	Seed uint64
}

// Validate checks the invariants and returns an ErrGeometry error naming the
// first one broken.
func (g Geometry) Validate() error {
	switch {
	case g.K < 1:
		return fmt.Errorf("k=%d: need at least one data shard: %w", g.K, ErrGeometry)
	case g.M < 0:
		return fmt.Errorf("m=%d: parity shards cannot be negative: %w", g.M, ErrGeometry)
	case g.K+g.M > MaxShards:
		return fmt.Errorf("k+m=%d: at most %d shards per stripe: %w", g.K+g.M, MaxShards, ErrGeometry)
	case g.Chunk < MinChunk || g.Chunk > MaxChunk || bits.OnesCount64(uint64(g.Chunk)) != 1:
		return fmt.Errorf("chunk=%d: must be a power of two from %d to %d: %w", g.Chunk, MinChunk, MaxChunk, ErrGeometry)
	case g.SlotSize <= 0 || g.SlotSize%g.Chunk != 0:
		return fmt.Errorf("slot size=%d: must be a positive multiple of chunk %d: %w", g.SlotSize, g.Chunk, ErrGeometry)
	case g.Log && !g.Checksums:
		return fmt.Errorf("write log without checksums: the log's records are checked against block checksums: %w", ErrGeometry)
	case g.Seed != 0 && !g.Checksums:
		return fmt.Errorf("checksum seed without checksums: %w", ErrGeometry)
	case g.StripesPerSegment() < 1:
		return fmt.Errorf("slot size=%d: no room for a chunk of %d beside the checksum and write-log areas: %w", g.SlotSize, g.Chunk, ErrGeometry)
	}
	return nil
}

// String renders the geometry as "k+m/chunk/slot", e.g. "4+2/131072/1073741824",
// with "/crc32c" appended when it has checksums, "/ppl" with a write log
// and "/bound" with a seed.
func (g Geometry) String() string {
	s := fmt.Sprintf("%d+%d/%d/%d", g.K, g.M, g.Chunk, g.SlotSize)
	if g.Checksums {
		s += "/crc32c"
	}
	if g.Log {
		s += "/ppl"
	}
	if g.Seed != 0 {
		s += "/bound"
	}
	return s
}

// N is the number of shards (and slots) per stripe: K+M.
func (g Geometry) N() int { return g.K + g.M }

// StripeData is the number of logical bytes in one stripe: K*Chunk.
func (g Geometry) StripeData() int64 { return int64(g.K) * g.Chunk }

// StripesPerSegment is the number of stripes a segment holds.
func (g Geometry) StripesPerSegment() int64 { return g.DataEnd() / g.Chunk }

// ChecksumArea is the number of bytes at the end of each slot that hold
// checksums: a 1/1024 share of the slot (ChecksumSize per ChecksumBlock),
// rounded up to whole chunks; zero without Checksums.
func (g Geometry) ChecksumArea() int64 {
	if !g.Checksums {
		return 0
	}
	need := g.SlotSize / ChecksumBlock * ChecksumSize
	return (need + g.Chunk - 1) / g.Chunk * g.Chunk
}

// DataEnd is the slot offset where the stripes end (and the checksum area
// starts).
func (g Geometry) DataEnd() int64 { return g.SlotSize - g.ChecksumArea() - g.LogArea() }

// LogRowBytes is what one row adds to a write-log record header: a bitmap
// of the data shards written (4 bytes) and two checksums per data shard.
func (g Geometry) LogRowBytes() int64 { return 4 + 2*ChecksumSize*int64(g.K) }

// LogHeaderBlocks is the number of blocks of the header of a write-log
// record covering rows rows.
func (g Geometry) LogHeaderBlocks(rows int64) int64 {
	return (LogHeaderFixed + rows*g.LogRowBytes() + ChecksumBlock - 1) / ChecksumBlock
}

// LogRecordMax is the number of blocks of the largest write-log record:
// a header covering every row of a chunk and a partial-parity block per
// row.
func (g Geometry) LogRecordMax() int64 {
	return g.LogHeaderBlocks(g.BlocksPerChunk()) + g.BlocksPerChunk()
}

// LogArea is the number of bytes at the end of each slot that hold the
// write log: zero without Log.
func (g Geometry) LogArea() int64 {
	if !g.Log {
		return 0
	}
	need := max(logRecordsMin*g.LogRecordMax(), logBlocksMin) * ChecksumBlock
	need = max(need, g.SlotSize/logShare)
	return (need + g.Chunk - 1) / g.Chunk * g.Chunk
}

// LogOffset is the slot offset where the write-log area starts.
func (g Geometry) LogOffset() int64 { return g.SlotSize - g.LogArea() }

// BlocksPerChunk is the number of checksum blocks in one chunk.
func (g Geometry) BlocksPerChunk() int64 { return g.Chunk / ChecksumBlock }

// ChecksumOffset returns the slot offset of the checksum of the block at
// chunk offset off of stripe t (off a multiple of ChecksumBlock).
func (g Geometry) ChecksumOffset(t, off int64) int64 {
	return g.DataEnd() + g.ChecksumIndex(t, off)
}

// ChecksumIndex is ChecksumOffset less DataEnd: where in the checksum area
// the block's checksum is. Unlike DataEnd it costs no division (the IO
// path's way to it).
func (g Geometry) ChecksumIndex(t, off int64) int64 {
	return (t*g.BlocksPerChunk() + off/ChecksumBlock) * ChecksumSize
}

// SlotTags gives the checksum tags of the blocks of slot slot of segment
// seg (ChecksumTag). It is the per-slot half of the work, done once when
// the slot is opened; Page and PageTags.Of are the rest.
type SlotTags struct {
	base uint64 // the volume's seed mixed with the segment
	slot uint32 // slot index + 1: the tag's low bits
}

// PageTags are the tags of one page of a slot's checksums: TagPage
// blocks, whose checksums fill one ChecksumBlock of the checksum area.
type PageTags struct {
	hash uint32 // of seed, segment and page
	slot uint32
}

const (
	// TagPage is the number of blocks whose tags share a page hash: the
	// checksums on one ChecksumBlock of the checksum area.
	TagPage = ChecksumBlock / ChecksumSize
	// tagSlotBits is the number of low bits of a tag that hold the slot
	// index + 1 (MaxShards fits): two slots of one segment never share a
	// tag for one block, so a swap of two slots is always seen.
	tagSlotBits = 6
)

// SlotTags returns the tags of the blocks of slot slot of segment seg:
// all zero (no binding) without a Seed.
func (g Geometry) SlotTags(seg int64, slot int) SlotTags {
	if g.Seed == 0 {
		return SlotTags{}
	}
	return SlotTags{base: mix64(g.Seed + uint64(seg)*0x9e3779b97f4a7c15), slot: uint32(slot) + 1}
}

// Page returns the tags of blocks [page*TagPage, (page+1)*TagPage).
func (t SlotTags) Page(page int64) PageTags {
	if t.slot == 0 {
		return PageTags{}
	}
	return PageTags{hash: uint32(mix64(t.base^uint64(page)*0xc2b2ae3d27d4eb4f) >> 32), slot: t.slot}
}

// Of returns the tag of block j of the page: never zero with a Seed, zero
// without. Its high bits are the page's hash xor j times an odd constant
// (so the blocks of a page differ), its low tagSlotBits bits the slot
// index + 1.
func (p PageTags) Of(j int) uint32 {
	if p.slot == 0 {
		return 0
	}
	return (p.hash^uint32(j)*0x9e3779b9)<<tagSlotBits | p.slot
}

// Of returns the tag of block block of the slot (its index in the slot:
// ChecksumIndex / ChecksumSize).
func (t SlotTags) Of(block int64) uint32 { return t.Page(block / TagPage).Of(int(block % TagPage)) }

// Bound reports whether the tags are not zero (a geometry with a Seed).
func (t SlotTags) Bound() bool { return t.slot != 0 }

// Misplaced reports whether diff, a block's checksum xor the value stored
// for it in this slot, is this slot's tag xor another slot's of the same
// segment and block: the block and its checksum were written for that
// slot (the two slots were swapped), not torn. n is the number of slots.
func (t SlotTags) Misplaced(diff uint32, n int) bool {
	other := int(diff^t.slot) - 1
	return t.slot != 0 && diff != 0 && diff>>tagSlotBits == 0 && other >= 0 && other < n
}

// ChecksumTag is the tag of block block of slot slot of segment seg:
// SlotTags(seg, slot).Of(block).
func (g Geometry) ChecksumTag(seg int64, slot int, block int64) uint32 {
	return g.SlotTags(seg, slot).Of(block)
}

// mix64 is splitmix64's finaliser: a bijection of uint64 that spreads
// every input bit over the output.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// SegmentData is the number of logical bytes a segment holds.
func (g Geometry) SegmentData() int64 { return g.StripesPerSegment() * g.StripeData() }

// Segments is the number of segments a volume of size bytes needs.
func (g Geometry) Segments(size int64) int64 {
	return (size + g.SegmentData() - 1) / g.SegmentData()
}

// SlotOf returns the slot of a segment that holds shard s of stripe t.
func (g Geometry) SlotOf(t int64, s int) int {
	return int((int64(s) + t) % int64(g.N()))
}

// ShardIn returns the shard that slot holds for stripe t: the inverse of SlotOf.
func (g Geometry) ShardIn(t int64, slot int) int {
	n := int64(g.N())
	return int(((int64(slot)-t)%n + n) % n)
}

// StripeID names one stripe of a volume.
type StripeID struct {
	Segment int64 // segment index in the volume
	Stripe  int64 // stripe index inside the segment
}

// Offset returns the logical offset of the first byte of the stripe.
func (g Geometry) Offset(id StripeID) int64 {
	return id.Segment*g.SegmentData() + id.Stripe*g.StripeData()
}

// SlotOffset returns the byte offset inside every slot of the segment where the
// stripe's chunks start.
func (g Geometry) SlotOffset(id StripeID) int64 { return id.Stripe * g.Chunk }

// Piece is the part of a request that falls in one data chunk.
type Piece struct {
	Shard int   // data shard, 0..K-1
	Off   int64 // offset inside the chunk
	Len   int64
	Buf   int64 // offset of the piece in the request buffer
}

// StripeIO is the part of a request that falls in one stripe: its pieces in
// logical order, contiguous in the request buffer.
type StripeIO struct {
	ID     StripeID
	Pieces []Piece
}

// Full reports whether the stripe IO covers the whole stripe.
func (s StripeIO) Full(g Geometry) bool {
	var n int64
	for _, p := range s.Pieces {
		n += p.Len
	}
	return n == g.StripeData()
}

// Span returns the smallest chunk range [lo, hi) that contains every piece.
func (s StripeIO) Span() (lo, hi int64) {
	lo, hi = s.Pieces[0].Off, s.Pieces[0].Off+s.Pieces[0].Len
	for _, p := range s.Pieces[1:] {
		lo, hi = min(lo, p.Off), max(hi, p.Off+p.Len)
	}
	return lo, hi
}

// Split cuts the logical range [off, off+n) into per-stripe pieces, in order.
// n may be zero (no stripes). Callers validate bounds and alignment first.
func (g Geometry) Split(off, n int64) []StripeIO {
	var out []StripeIO
	for done := int64(0); done < n; {
		cur := off + done
		seg, inSeg := cur/g.SegmentData(), cur%g.SegmentData()
		io := StripeIO{ID: StripeID{Segment: seg, Stripe: inSeg / g.StripeData()}}
		for inStripe := inSeg % g.StripeData(); inStripe < g.StripeData() && done < n; {
			p := Piece{Shard: int(inStripe / g.Chunk), Off: inStripe % g.Chunk, Buf: done}
			p.Len = min(g.Chunk-p.Off, n-done)
			io.Pieces = append(io.Pieces, p)
			done += p.Len
			inStripe += p.Len
		}
		out = append(out, io)
	}
	return out
}
