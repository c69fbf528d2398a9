package volume

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/crc32c"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// zeroSum is the crc32c of a block of zeros (TestZeroSum checks it).
const zeroSum = 0x98f94189

// blockSum is the checksum of one block: its crc32c xor that of a zero
// block (so a zero block's is zero). In formats 2 and 3 it is also the
// stored value, so that a trimmed block (zeros) and its trimmed checksum
// (zero) agree without a write. In format 4 (Geometry.Seed) the stored
// value is blockSum xor the block's tag (layout.SlotTags), which is never
// zero: a blank block (zeros in data and checksum area) fails its check,
// and so does a block read from another place. The cache of checksum pages
// holds the stored values; the tags are applied where a checksum goes in or
// comes out of it (sumPage.load, sumPage.set), so that everything else,
// heal and the write log's records included, works with blockSum, and a
// page is read and written as it is.
func blockSum(b []byte) uint32 { return crc32c.Checksum(b) ^ zeroSum }

// blockSums appends the checksums of the blocks of b to dst: the one home
// of the checksums of what a write puts. A logged write computes its data
// blocks' once, for its record and for the checksum area both.
func blockSums(dst []uint32, b []byte) []uint32 {
	for j := 0; j+layout.ChecksumBlock <= len(b); j += layout.ChecksumBlock {
		dst = append(dst, blockSum(b[j:j+layout.ChecksumBlock]))
	}
	return dst
}

// sumPageSize is the unit in which the checksum area is read, cached and
// written: one block, holding the checksums of 1024 blocks (4 MiB) of the
// slot. A chunk's checksums never straddle two pages (chunks are powers of
// two of at most 4 MiB and the area starts chunk-aligned).
const sumPageSize = layout.ChecksumBlock

// sumTable caches one slot copy's checksum area page by page, as stored.
// The volume's owner is the only writer of its slots, so the cache is
// authoritative once a page is loaded; pages are loaded on first use (a
// fresh slot's are known to hold those of zero blocks: allocation trims the
// slot and, in format 4, writes its checksum area, initSums).
type sumTable struct {
	tags    layout.SlotTags // the slot's place (format 4): xored into the stored values
	fresh   bool            // the slot was cleared on allocation: unloaded pages hold zero blocks' checksums
	dropped atomic.Bool     // the slot was freed or moved away: write nothing more
	once    sync.Once
	pages   []atomic.Pointer[sumPage] // by page index, filled on first use
}

// sumPage is one cached page of a checksum area.
type sumPage struct {
	idx     int64           // page index in the checksum area
	tags    layout.PageTags // of its blocks (format 4; zero otherwise)
	loaded  atomic.Bool
	pending atomic.Bool // queued for the next Flush
	io      sync.Mutex  // serialises loading and writing the page
	mu      sync.Mutex  // guards buf and gen
	buf     [sumPageSize]byte
	gen     int64 // changes applied to buf
	stored  int64 // gen last written (REQUIRES: io held)
	fua     int64 // gen last written with FUA (REQUIRES: io held)
}

// page returns page idx of the checksum area of geometry g, creating it
// on first use (without a lock: the hot path of every shard IO).
func (t *sumTable) page(idx int64, g layout.Geometry) *sumPage {
	t.once.Do(func() { t.pages = make([]atomic.Pointer[sumPage], g.ChecksumArea()/sumPageSize) })
	if p := t.pages[idx].Load(); p != nil {
		return p
	}
	p := &sumPage{idx: idx, tags: t.tags.Page(idx)}
	if t.fresh {
		putTags(p.buf[:], p.tags) // what initSums wrote
		p.loaded.Store(true)
	}
	if t.pages[idx].CompareAndSwap(nil, p) {
		return p
	}
	return t.pages[idx].Load()
}

// sumPageOf returns the loaded page that holds the checksums of stripe t
// of slot copy sl from chunk offset off, and the byte index of the first.
func (v *Volume) sumPageOf(ctx context.Context, sl *slot, t, off int64) (*sumPage, int, error) {
	at := v.g.ChecksumIndex(t, off)
	p := sl.sums.page(at/sumPageSize, v.g)
	if !p.loaded.Load() {
		p.io.Lock()
		defer p.io.Unlock()
		if !p.loaded.Load() {
			var b [sumPageSize]byte
			if err := sl.dev.ReadAt(ctx, b[:], v.g.DataEnd()+at/sumPageSize*sumPageSize); err != nil {
				return nil, 0, fmt.Errorf("reading checksums: %w", err)
			}
			p.mu.Lock()
			p.buf = b
			p.mu.Unlock()
			p.loaded.Store(true)
		}
	}
	return p, int(at % sumPageSize), nil
}

// storedSums fills want with the stored checksums of the blocks of stripe
// t of slot copy sl from chunk offset off.
func (v *Volume) storedSums(ctx context.Context, sl *slot, t, off int64, want []uint32) error {
	p, at, err := v.sumPageOf(ctx, sl, t, off)
	if err != nil {
		return err
	}
	p.load(at, want)
	return nil
}

// sumBatch is how many checksums verify handles at a time (and how many a
// shard write keeps on its stack): the buffer stays small (a chunk of 128
// KiB has 32 blocks) and the page lock is held only to copy them, not to
// compute them.
const sumBatch = 64

// load copies the checksums (blockSum) from byte at of the page into sums.
func (p *sumPage) load(at int, sums []uint32) {
	j := at / layout.ChecksumSize
	p.mu.Lock()
	for i := range sums {
		sums[i] = binary.LittleEndian.Uint32(p.buf[at+4*i:]) ^ p.tags.Of(j+i)
	}
	p.mu.Unlock()
}

// set stores sum (a blockSum) as the checksum at byte at of the page.
// REQUIRES: p.mu held.
func (p *sumPage) set(at int, sum uint32) {
	binary.LittleEndian.PutUint32(p.buf[at:], sum^p.tags.Of(at/layout.ChecksumSize))
}

// verify checks b, read from stripe t of slot copy sl at chunk offset off,
// against its stored checksums. A mismatch is a *ChecksumError (class
// blockdev.ErrCorrupt); failing to read the checksums is the device's error.
func (v *Volume) verify(ctx context.Context, s *segment, i int, sl *slot, t, off int64, b []byte) error {
	p, at, err := v.sumPageOf(ctx, sl, t, off)
	if err != nil {
		return err
	}
	var want [sumBatch]uint32
	n := len(b) / layout.ChecksumBlock
	for lo := 0; lo < n; lo += sumBatch {
		hi := min(lo+sumBatch, n)
		p.load(at+4*lo, want[:hi-lo])
		for j := lo; j < hi; j++ {
			if blockSum(b[j*layout.ChecksumBlock:(j+1)*layout.ChecksumBlock]) != want[j-lo] {
				return &ChecksumError{NS: sl.ref.NS, Segment: s.id, Slot: i, Stripe: t, Offset: sl.ref.Slot*v.g.SlotSize + t*v.g.Chunk + off + int64(j)*layout.ChecksumBlock}
			}
		}
	}
	return nil
}

// writeSums stores sums, the checksums of the blocks just written to
// stripe t of slot copy sl from chunk offset off, and writes their page
// (with FUA when fua).
func (v *Volume) writeSums(ctx context.Context, sl *slot, t, off int64, sums []uint32, fua bool) error {
	p, at, err := v.sumPageOf(ctx, sl, t, off)
	if err != nil {
		return err
	}
	p.mu.Lock()
	for j, sum := range sums {
		p.set(at+4*j, sum)
	}
	p.gen++
	mine := p.gen
	p.mu.Unlock()
	if fua {
		return v.storePage(ctx, sl, p, mine, true)
	}
	v.sumsPending(sl, p)
	return nil
}

// sumsPending queues page p of slot copy sl for the next Flush. Checksums
// of a write without FUA need be durable only when the write is, so their
// pages are written once per flush, not once per write; a crash before the
// flush leaves blocks without their checksums only in dirty segments, which
// Recover resyncs (healResync).
func (v *Volume) sumsPending(sl *slot, p *sumPage) {
	if !p.pending.CompareAndSwap(false, true) {
		return // queued already: the Flush writes the page as it is then
	}
	v.sumMu.Lock()
	if v.sumDirty == nil {
		v.sumDirty = map[*sumPage]*slot{}
	}
	v.sumDirty[p] = sl
	v.sumMu.Unlock()
}

// storeSums writes the queued checksum pages (of slot copy only, when not
// nil). A page whose namespace is unavailable marks it down, as a failed
// write does; the caller's flush then treats its slots as lost.
func (v *Volume) storeSums(ctx context.Context, only *slot) error {
	type item struct {
		p  *sumPage
		sl *slot
	}
	var todo []item
	v.sumMu.Lock()
	for p, sl := range v.sumDirty {
		if only == nil || sl == only {
			todo = append(todo, item{p, sl})
			delete(v.sumDirty, p)
			p.pending.Store(false) // a change from now on queues it again
		}
	}
	v.sumMu.Unlock()
	return v.each(len(todo), func(i int) error {
		it := todo[i]
		it.p.mu.Lock()
		gen := it.p.gen
		it.p.mu.Unlock()
		err := v.storePage(ctx, it.sl, it.p, gen, false)
		switch {
		case err == nil:
		case blockdev.Class(err) == blockdev.ErrUnavailable:
			it.sl.ns.down.Store(true) // its slots go stale; Repair rewrites them
		default:
			v.sumsPending(it.sl, it.p) // the next Flush tries again
			return err
		}
		return nil
	})
}

// zeroSums sets the checksums of stripes [first, last] of slot copy sl to
// those of zero blocks (after a trim or write-zeroes) and writes them, one
// page write per page: a trimmed block is told from a lost one by its
// written checksum (format 4), never by a trimmed checksum area.
func (v *Volume) zeroSums(ctx context.Context, sl *slot, first, last int64) error {
	per := v.g.BlocksPerChunk() * layout.ChecksumSize // checksum bytes per stripe
	for t := first; t <= last; {
		p, at, err := v.sumPageOf(ctx, sl, t, 0)
		if err != nil {
			return err
		}
		n := min(last+1-t, (sumPageSize-int64(at))/per) // stripes on this page
		p.mu.Lock()
		for j := at; j < at+int(n*per); j += layout.ChecksumSize {
			p.set(j, 0)
		}
		p.gen++
		mine := p.gen
		p.mu.Unlock()
		if err := v.storePage(ctx, sl, p, mine, false); err != nil {
			return err
		}
		t += n
	}
	return nil
}

// storePage makes change gen of page idx durable as far as a write is
// (with FUA when fua). Writers of one page queue on its io lock; the one
// at the head writes the page as it is then, with every change made so
// far, so that a page image never lands after a newer one and concurrent
// writers share one write.
func (v *Volume) storePage(ctx context.Context, sl *slot, p *sumPage, gen int64, fua bool) error {
	p.io.Lock()
	defer p.io.Unlock()
	if sl.sums.dropped.Load() || (p.stored >= gen && (!fua || p.fua >= gen)) {
		return nil
	}
	bp, b := v.getBuf(sumPageSize) // pooled: a device is an interface, so an array here would be allocated on the heap (a chunk is at least a page)
	defer v.putBuf(bp)
	p.mu.Lock()
	copy(b, p.buf[:])
	cur := p.gen
	p.mu.Unlock()
	off := v.g.DataEnd() + p.idx*sumPageSize
	var err error
	if fua {
		err = blockdev.WriteFUA(ctx, sl.dev, b, off)
	} else {
		err = sl.dev.WriteAt(ctx, b, off)
	}
	if err != nil {
		return fmt.Errorf("writing checksums: %w", err)
	}
	sl.ns.unflushed.Store(true)
	p.stored = cur
	if fua {
		p.fua = cur
	}
	return nil
}

// putTags writes the tags of a page's blocks to b, a page: the stored
// checksums of zero blocks. Without tags (formats 2 and 3) they are zeros.
func putTags(b []byte, tags layout.PageTags) {
	for j := range layout.TagPage {
		binary.LittleEndian.PutUint32(b[j*layout.ChecksumSize:], tags.Of(j))
	}
}

// initSumsBatch is how many checksum pages initSums writes at once.
const initSumsBatch = 64

// initSums writes the whole checksum area of a freshly allocated slot
// copy (format 4) with the stored checksums of zero blocks (their tags),
// so that the slot's unwritten blocks verify as zeros while a blank region
// does not. Formats 2 and 3 need no write: their trimmed area already
// holds zero blocks' checksums.
func (v *Volume) initSums(ctx context.Context, sl *slot) error {
	if !sl.sums.tags.Bound() {
		return nil
	}
	pages := v.g.ChecksumArea() / sumPageSize
	buf := make([]byte, min(pages, initSumsBatch)*sumPageSize)
	for idx := int64(0); idx < pages; {
		n := min(pages-idx, initSumsBatch)
		b := buf[:n*sumPageSize]
		for j := range n {
			putTags(b[j*sumPageSize:(j+1)*sumPageSize], sl.sums.tags.Page(idx+j))
		}
		if err := sl.dev.WriteAt(ctx, b, v.g.DataEnd()+idx*sumPageSize); err != nil {
			return fmt.Errorf("initialising checksums: %w", err)
		}
		idx += n
	}
	return nil
}

// ChecksumError reports a block whose contents do not match its stored
// checksum. Its class is blockdev.ErrCorrupt.
type ChecksumError struct {
	NS      string
	Segment int64
	Slot    int
	Stripe  int64
	Offset  int64 // byte offset of the first bad block in the namespace
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("checksum mismatch: namespace %s offset %d (segment %d slot %d stripe %d)", e.NS, e.Offset, e.Segment, e.Slot, e.Stripe)
}

func (e *ChecksumError) Unwrap() error { return blockdev.ErrCorrupt }
