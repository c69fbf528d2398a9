package volume

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// Proving rows: a block and its checksum live on one device. A device that
// acknowledges a write it did not make (a lost write, dm-flakey
// drop_writes) keeps the old block beside its old checksum; the owner that
// wrote caches the newer checksum and catches it, but a new owner (after a
// crash) loads the old checksum from the same device, and the two agree.
// Only the other shards of the stripe remember the write: parity was
// written on other devices. So an owner trusts a row (the same 4 KiB block
// of every shard of a stripe) only once it has seen the row's shards agree
// with each other (proveRows), or written the row itself from rows it had
// proven. Until then the first read or partial write of the row reads every
// usable shard over the span, checks each block against its checksum and
// the row against parity. A row that does not agree is searched for the one
// stale shard: the shard without which the others agree. It is rebuilt
// from the others and rewritten with its checksum (a read-only owner reads
// around it). With no such shard, or more than one candidate (M = 1, or
// only K+1 shards left), the row is refused: IO on it fails with class
// ErrCorrupt, never returning data no other device vouches for. M devices
// that all lost the same write can make a good shard look stale: parity
// corrects one unknown bad shard or detects M of them, not both
// (docs/architecture.md, "Lost writes").
//
// Only blocks as the devices hold them and matching their checksums (good
// blocks) are evidence. A block this owner rebuilt from others is not: it
// agrees with its sources by construction. So a heal rebuilds the blocks
// of a row that fail their checksums (bad blocks) only from good blocks
// that agree with each other, or of a row this owner proved
// (rebuildSound); a row whose good blocks disagree is left bad for
// proveRow, which settles or refuses it. A heal that took any K good
// blocks (the old rule) went wrong with two devices lying in turn on 4+2:
// one lost an overwrite and a later write of its checksum page from the
// owner's cache made the loss show (a bad block), the other lost a later
// write of another shard of the same row with its checksum (a stale good
// block). A read of another row of the stripe healed the whole stripe and
// rebuilt the bad block from four of the five good ones, the stale one
// among them; written with its checksum, the rebuilt block agreed with
// those four, so the row's proof found five agreeing blocks, took the
// sixth, the parity block that still held the acknowledged data, for the
// stale one, rewrote it, and the row read bytes never written.
//
// Why the rules hold, when at most M shards of a row are wrong (lost a
// write or fail their checksum) and no two lost the same write: with b
// bad blocks and every shard usable, g = N-b are good and at most M-b = g-K
// of them are wrong. Any K blocks of a row determine a codeword, and two
// codewords differ in at least M+1 shards, so g good blocks that agree
// with g-K or fewer of them wrong hold none (agreeing on another codeword
// takes g-K+1 wrong ones). With g = K nothing is compared, but then b = M
// and no good block is wrong. A stale candidate (staleShard) is the one
// good block without which the g-1 others agree. With one wrong good
// block, left out it leaves the others agreeing; a right one left out
// leaves g-1 blocks with the wrong one among them, which cannot agree when
// g >= K+2 (and with g = K+1 no candidate is ever found). Several wrong
// good blocks (b = 0, M >= 2): left out, one leaves too many wrong among
// the rest to agree; a right one left out leaves them agreeing only if the
// wrong blocks hold one older version of the row, that is if they lost
// the same write. Blocks that lost different writes each lack bytes the
// others hold (it would take the bytes written to collide), so no block
// left out makes the rest agree, and the row is refused. That takes writes
// that change blocks unalike: a row torn between two versions of writes
// that changed every block alike does agree without one block now and
// then, which is why a resync trusts a stale shard of a torn row only
// when something vouches for it (staleVouched). The limit: more
// than M wrong shards, devices that lost the same write, or a row with a
// shard unusable (a namespace down) and a lying one, where g-K wrong good
// blocks are no longer ruled out, can agree on an old version; and with
// only K shards left nothing is checked and the row reads as they hold it.

// rowBits is a bitmap of the rows of one segment (stripe*BlocksPerChunk +
// block offset in the chunk). Bits are only ever set.
type rowBits []atomic.Uint64

func newRowBits(rows int64) rowBits { return make(rowBits, (rows+63)/64) }

// all reports whether rows [lo, hi) are set.
func (b rowBits) all(lo, hi int64) bool {
	for lo < hi {
		end := min(hi, lo/64*64+64)
		mask := rowMask(lo, end)
		if b[lo/64].Load()&mask != mask {
			return false
		}
		lo = end
	}
	return true
}

// set sets rows [lo, hi).
func (b rowBits) set(lo, hi int64) {
	for lo < hi {
		end := min(hi, lo/64*64+64)
		b[lo/64].Or(rowMask(lo, end))
		lo = end
	}
}

// rowMask has the bits of rows [lo, hi) of lo's word set (hi at most the
// word's end).
func rowMask(lo, hi int64) uint64 {
	n := hi - lo
	if n == 64 {
		return ^uint64(0)
	}
	return (uint64(1)<<n - 1) << (lo % 64)
}

// spanRows returns the segment rows that chunk offsets [lo, hi) of stripe
// t cover.
func (v *Volume) spanRows(t, lo, hi int64) (int64, int64) {
	base := t * v.g.BlocksPerChunk()
	return base + lo/layout.ChecksumBlock, base + (hi+layout.ChecksumBlock-1)/layout.ChecksumBlock
}

// proving reports whether the volume proves rows: it needs checksums (to
// tell a bad block from a stale one) and parity to compare with.
func (v *Volume) proving() bool { return v.g.Checksums && v.g.M > 0 }

// proven reports whether every row sio touches is proven (always, when the
// volume does not prove rows).
func (v *Volume) proven(s *segment, sio layout.StripeIO) bool {
	if !v.proving() {
		return true
	}
	lo, hi := sio.Span()
	first, end := v.spanRows(sio.ID.Stripe, lo, hi)
	return s.proven.all(first, end)
}

// setProven records that rows [lo, hi) (chunk offsets) of stripe t agree.
func (v *Volume) setProven(s *segment, t, lo, hi int64) {
	if v.proving() {
		first, end := v.spanRows(t, lo, hi)
		s.proven.set(first, end)
	}
}

// StaleRowError reports a row whose shards match their checksums but not
// each other, where parity cannot tell which shard is stale (a device
// that lost an acknowledged write). Its class is blockdev.ErrCorrupt.
type StaleRowError struct {
	Segment, Stripe int64
	Offset          int64 // chunk offset of the row
}

func (e *StaleRowError) Error() string {
	return fmt.Sprintf("segment %d stripe %d: block at chunk offset %d: the shards match their checksums but disagree with each other, and parity cannot tell which one is stale", e.Segment, e.Stripe, e.Offset)
}

func (e *StaleRowError) Unwrap() error { return blockdev.ErrCorrupt }

// proveRows proves the rows that sio touches and are not proven yet
// (REQUIRES: stripe lock held, s.io held shared); a write of the whole
// stripe needs none. It returns a
// *StaleRowError for a row it cannot settle. It proves nothing (and lets
// the IO go on as before) where it cannot compare: with fewer than K+1
// shards left, or in a segment whose resync after a crash is pending (its
// rows may hold two versions of a write no flush acknowledged).
func (v *Volume) proveRows(ctx context.Context, s *segment, sio layout.StripeIO) error {
	if v.proven(s, sio) || sio.Full(v.g) {
		return nil
	}
	lo, hi := sio.Span()
	return v.proveSpan(ctx, s, sio.ID, lo, hi)
}

// proveSpan is proveRows for chunk offsets [lo, hi) of stripe id: also
// what a rebuild proves before it reconstructs a chunk from the others.
func (v *Volume) proveSpan(ctx context.Context, s *segment, id layout.StripeID, lo, hi int64) error {
	lo, hi = lo/layout.ChecksumBlock*layout.ChecksumBlock, (hi+layout.ChecksumBlock-1)/layout.ChecksumBlock*layout.ChecksumBlock
	first, end := v.spanRows(id.Stripe, lo, hi)
	if !v.proving() || s.proven.all(first, end) || v.resyncPending(s.id) {
		return nil
	}
	img, err := v.readSpan(ctx, s, id, lo, hi)
	if err != nil || img == nil {
		return err
	}
	defer img.bufs.release()
	if v.spanAgrees(img) { // the common case: one check for the span
		v.setProven(s, id.Stripe, lo, hi)
		return nil
	}
	var refused error
	for r := lo; r < hi; r += layout.ChecksumBlock {
		ok, err := v.proveRow(ctx, s, id, img, (r-lo)/layout.ChecksumBlock, r)
		if err != nil {
			return err
		}
		if !ok && refused == nil {
			refused = &StaleRowError{Segment: s.id, Stripe: id.Stripe, Offset: r}
		}
	}
	return refused
}

// spanImage is every usable shard of a stripe over one span of chunk
// offsets, and the blocks that matched their checksums.
type spanImage struct {
	bufs *stripeBufs
	good [][]bool // by shard and block of the span
}

// readSpan reads chunk offsets [lo, hi) of every usable shard with their
// checksums. A shard that fails is left out (a device error marks it as a
// read would). It returns nil when fewer than K+1 shards are left.
func (v *Volume) readSpan(ctx context.Context, s *segment, id layout.StripeID, lo, hi int64) (*spanImage, error) {
	n, rows := v.g.N(), (hi-lo)/layout.ChecksumBlock
	usable := v.usableShards(s, id)
	if count(usable) <= v.g.K {
		return nil, nil
	}
	img := &spanImage{bufs: &stripeBufs{v: v, shards: make([][]byte, n)}, good: make([][]bool, n)}
	marks, sumStore := make([]bool, int64(n)*rows), make([]uint32, int64(n)*rows)
	bufs := make([][]byte, n)
	for sh := range n {
		if usable[sh] {
			bufs[sh] = img.bufs.scratch(hi - lo) // before the reads: the pool is not safe for concurrent use
		}
	}
	err := v.each(n, func(sh int) error {
		if !usable[sh] {
			return nil
		}
		img.good[sh] = marks[int64(sh)*rows : int64(sh+1)*rows]
		i := v.g.SlotOf(id.Stripe, sh)
		sl := s.readSlot(i, id.Stripe)
		if sl == nil {
			return nil
		}
		b, sums := bufs[sh], sumStore[int64(sh)*rows:int64(sh+1)*rows]
		err := sl.dev.ReadAt(ctx, b, v.g.SlotOffset(id)+lo)
		if err == nil {
			err = v.storedSums(ctx, sl, id.Stripe, lo, sums)
		}
		if err = v.shardFailed(s, sl, i, id.Stripe, err); err != nil {
			if isShardFault(err) {
				return nil // left out: the IO that follows works around it
			}
			return err
		}
		img.bufs.shards[sh] = b
		for r := range rows {
			img.good[sh][r] = blockSum(b[r*layout.ChecksumBlock:(r+1)*layout.ChecksumBlock]) == sums[r]
		}
		return nil
	})
	if err != nil {
		img.bufs.release()
		return nil, err
	}
	return img, nil
}

// spanAgrees reports whether every shard of the stripe was read, every
// block matched its checksum and the whole span agrees with parity.
func (v *Volume) spanAgrees(img *spanImage) bool {
	for sh, b := range img.bufs.shards {
		if b == nil || slices.Contains(img.good[sh], false) {
			return false
		}
	}
	ok, err := v.codec.Verify(img.bufs.shards)
	return err == nil && ok
}

// proveRow proves block j of the span image, chunk offset off: it reports
// whether the row agrees or was settled (its stale shard rewritten, or read
// around by a read-only owner), false when it is refused. A row with K or
// fewer good blocks proves nothing and is left for the IO to handle.
func (v *Volume) proveRow(ctx context.Context, s *segment, id layout.StripeID, img *spanImage, j, off int64) (bool, error) {
	n := v.g.N()
	lo, hi := j*layout.ChecksumBlock, (j+1)*layout.ChecksumBlock
	var present [layout.MaxShards]bool
	for sh := range n {
		present[sh] = img.bufs.shards[sh] != nil && img.good[sh][j]
	}
	if count(present[:n]) <= v.g.K {
		return true, nil
	}
	blocks := make([][]byte, n)
	for sh := range n {
		if present[sh] {
			blocks[sh] = img.bufs.shards[sh][lo:hi]
		}
	}
	if v.rowAgrees(blocks, present[:n], -1) {
		v.setProven(s, id.Stripe, off, off+layout.ChecksumBlock)
		return true, nil
	}
	stale := v.staleShard(blocks, present[:n])
	if stale < 0 {
		return false, nil
	}
	return true, v.settleStale(ctx, s, id, blocks, present[:n], stale, off)
}

// rowAgrees reports whether the present blocks of a row, less shard
// without (-1: none), are consistent: with K of them rebuilding the
// others, parity matches. It needs K+1 of them (else it reports false).
func (v *Volume) rowAgrees(blocks [][]byte, present []bool, without int) bool {
	n := v.g.N()
	shards := make([][]byte, n)
	want := make([]bool, n)
	have := 0
	for sh := range n {
		if present[sh] && sh != without {
			shards[sh] = blocks[sh]
			have++
		} else {
			shards[sh] = make([]byte, 0, layout.ChecksumBlock)
			want[sh] = true
		}
	}
	if have <= v.g.K {
		return false
	}
	// The missing blocks are rebuilt from K of the present ones; parity
	// then holds only if every present block agrees with those K.
	if have < n && v.codec.ReconstructRange(shards, want) != nil {
		return false
	}
	ok, err := v.codec.Verify(shards)
	return err == nil && ok
}

// staleShard returns the one present shard without which the others agree,
// or -1 when there is none or more than one (then parity cannot tell).
func (v *Volume) staleShard(blocks [][]byte, present []bool) int {
	found := -1
	for sh, p := range present {
		if !p || !v.rowAgrees(blocks, present, sh) {
			continue
		}
		if found >= 0 {
			return -1
		}
		found = sh
	}
	return found
}

// settleStale rebuilds block off of shard stale of stripe id from the other
// present blocks and rewrites it with its checksum, counting and reporting
// it; a read-only owner writes nothing and makes the stripe a hole of that
// slot in memory, so that its IO reads around it.
func (v *Volume) settleStale(ctx context.Context, s *segment, id layout.StripeID, blocks [][]byte, present []bool, stale int, off int64) error {
	b := v.rebuildWithout(blocks, present, stale)
	if b == nil {
		return fmt.Errorf("segment %d stripe %d: a stale block could not be rebuilt: %w", s.id, id.Stripe, blockdev.ErrCorrupt)
	}
	i := v.g.SlotOf(id.Stripe, stale)
	v.csum.stale.Add(1)
	if v.ev.Checksum != nil {
		sl := s.slots[i]
		v.ev.Checksum(ChecksumInfo{NS: sl.ref.NS, Segment: s.id, Slot: i, Stripe: id.Stripe,
			Offset: sl.ref.Slot*v.g.SlotSize + v.g.SlotOffset(id) + off, Blocks: 1, Healed: btoi(!v.readOnly), Stale: 1, FoundBy: "read"})
	}
	if v.readOnly {
		if sl := s.readSlot(i, id.Stripe); sl != nil {
			s.addHole(sl, id.Stripe)
		}
		return nil
	}
	if err := v.shardWrite(ctx, s, id, stale, b, nil, off, false); err != nil {
		return err
	}
	v.setProven(s, id.Stripe, off, off+layout.ChecksumBlock)
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// epochRows is what a resync of a stripe knows of its writes since its last
// flush: its newest live write-log record (nil: none, so no write since).
type epochRows struct{ rec *logRecord }

// quiet reports whether row r had no write since the last flush.
func (e *epochRows) quiet(r int64) bool {
	if e == nil {
		return false
	}
	if e.rec == nil {
		return true
	}
	_, written := e.rec.covers(r)
	return !written
}

// proveImage checks, in a scrub or a resync, that the rows of a healed
// stripe image agree with parity before fixParity makes parity match the
// data. A row with one stale shard (the others agree without it) has it
// rebuilt. Otherwise a resync keeps a row written since the last flush as
// its data holds it (a torn write: either version is legal), and a row
// with no write since the last flush, or one a scrub finds, is disputed:
// left as it is, counted unhealed and refused to reads (proveRow), never
// parity rewritten over a stale block.
func (v *Volume) proveImage(s *segment, img *stripeImage, usable []bool, mode healMode, ep *epochRows) {
	if !v.proving() || count(usable) <= v.g.K {
		return
	}
	remember := mode == healScrub || ep != nil // settled rows need no proving by reads
	if count(usable) == v.g.N() {
		if ok, err := v.codec.Verify(img.bufs.shards); err == nil && ok { // the common case: one call for the stripe
			if remember {
				v.setProven(s, img.id.Stripe, 0, v.g.Chunk)
			}
			return
		}
	}
	blocks := make([][]byte, v.g.N())
	for r := range v.g.BlocksPerChunk() {
		if v.rowUnhealed(img, r) {
			continue
		}
		if v.proveImageRow(img, blocks, usable, mode, ep, r) && remember {
			v.setProven(s, img.id.Stripe, r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock)
		}
	}
}

// proveImageRow is proveImage for row r; it reports whether the row is
// settled (not disputed).
func (v *Volume) proveImageRow(img *stripeImage, blocks [][]byte, usable []bool, mode healMode, ep *epochRows, r int64) bool {
	lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
	for sh := range blocks {
		blocks[sh] = nil
		if usable[sh] {
			blocks[sh] = img.bufs.shards[sh][lo:hi]
		}
	}
	if v.rowAgrees(blocks, usable, -1) {
		return true
	}
	torn := mode == healResync && !ep.quiet(r)
	x := v.staleShard(blocks, usable)
	var rebuilt []byte
	if x >= 0 {
		rebuilt = v.rebuildWithout(blocks, usable, x)
		if torn && !v.staleVouched(img, usable, ep, x, r, rebuilt) {
			x = -1
		}
	}
	switch {
	case x >= 0:
		copy(blocks[x], rebuilt)
		v.markStale(img, x, r)
	case torn:
		// Written since the last flush: a torn write, kept as the data
		// holds it (fixParity). It may also be a write a device lost
		// before that flush, where the record is the newest only
		// because none came after it, but a device holding an old
		// record and old parity looks the same: M = 1 cannot tell.
	default:
		img.disputed[r] = true
		img.found.Unhealed++
		img.found.disputed++
		return false
	}
	return true
}

// staleVouched reports whether stale candidate x of row r, in a resync of
// a row written since the last flush, may be rebuilt as rebuilt. Such a
// row may hold a torn write: shards on two versions, data blocks whose
// checksum did not land kept as torn. The other shards agreeing without x
// proves little there: where the writes changed every block alike (a
// block of zeros rewritten with one repeated record, a trim of such
// blocks, each block's new bytes its old ones xor one constant), blocks of
// the two versions can agree on a codeword neither wrote, and x rebuilt
// from them holds bytes nobody wrote. The write log vouches for x: its
// record holds the checksums each data block of the row may have. Without
// a log, x is taken only when it and every other shard of the row match
// their checksums as read (a device that lost a flushed write, with the
// others as the flush left them); a row with a torn or rebuilt block, or a
// parity candidate, is left as a torn write (the data as it is, parity
// encoded from it).
func (v *Volume) staleVouched(img *stripeImage, usable []bool, ep *epochRows, x int, r int64, rebuilt []byte) bool {
	if x >= v.g.K || rebuilt == nil {
		return false
	}
	if ep != nil && ep.rec != nil {
		idx, logged := ep.rec.covers(r)
		if !logged {
			return false
		}
		sum, allowed := blockSum(rebuilt), ep.rec.sums[idx*v.g.K+x]
		return sum == allowed[0] || sum == allowed[1]
	}
	for sh, u := range usable {
		if u && img.bad[sh][r] {
			return false
		}
	}
	return true
}

// rebuildSound reports whether a heal (healRead, healScrub) may rebuild
// the bad blocks of row r of img from its good ones (those that match
// their checksums): when the volume does not prove rows, when this owner
// proved the row (its cached checksums catch any write lost since, so the
// good blocks are current), when the good blocks agree with each other,
// or when no more than K are good (nothing to compare: the bad ones took
// parity's margin; see the limit in the comment at the top of this file).
// Good blocks that disagree hold a stale one, and K of them, whichever
// rebuildRow takes, may include it: the block rebuilt from them would be
// bytes never written, stored with a checksum of its own and agreeing
// with those K, so that the next proof would take their wrong set for the
// truth and the one shard that disagrees for stale. The row is left bad
// instead, for proveRow to settle or refuse. A resync has its own second
// witness (healRow).
func (v *Volume) rebuildSound(img *stripeImage, usable []bool, bad []int, r int64, mode healMode) bool {
	if !v.proving() || mode == healResync {
		return true
	}
	row := img.id.Stripe*v.g.BlocksPerChunk() + r
	if img.seg.proven.all(row, row+1) {
		return true
	}
	n := v.g.N()
	lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
	blocks, good := make([][]byte, n), make([]bool, n)
	for sh := range n {
		if usable[sh] && !slices.Contains(bad, sh) {
			blocks[sh], good[sh] = img.bufs.shards[sh][lo:hi], true
		}
	}
	return count(good) <= v.g.K || v.rowAgrees(blocks, good, -1)
}

// markStale marks block r of shard x of the image rebuilt as stale.
func (v *Volume) markStale(img *stripeImage, x int, r int64) {
	img.fixed[x][r] = true
	img.bad[x][r] = true
	img.found.Stale++
	img.found.Healed++
}

// rebuildWithout rebuilds block x of a row from the other usable blocks
// (nil if it cannot).
func (v *Volume) rebuildWithout(blocks [][]byte, usable []bool, x int) []byte {
	n := v.g.N()
	shards := make([][]byte, n)
	want := make([]bool, n)
	for sh := range n {
		if usable[sh] && sh != x {
			shards[sh] = blocks[sh]
		} else {
			shards[sh] = make([]byte, 0, layout.ChecksumBlock)
			want[sh] = sh == x
		}
	}
	if v.codec.ReconstructRange(shards, want) != nil {
		return nil
	}
	return shards[x]
}
