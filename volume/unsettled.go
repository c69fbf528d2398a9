package volume

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// UnsettledBlock is a 4 KiB block of the volume that a recovery could not
// settle (UnsettledError): reads of it fail with class ErrCorrupt until a
// write of its whole stripe, or Settle.
type UnsettledBlock struct {
	Offset  int64 // byte offset in the volume
	Segment int64
	Stripe  int64
	Shard   int
}

// Message tells an operator what b, a block of volume name, is and what
// settles it: what the node and the controller log for each one.
func (b UnsettledBlock) Message(name string) string {
	return fmt.Sprintf("%s: block at offset %d lost in a crash mid-write and a namespace loss (segment %d stripe %d shard %d): reads of it fail until `nvstripe volume settle %s` zeroes it or its stripe is written whole",
		name, b.Offset, b.Segment, b.Stripe, b.Shard, name)
}

// Unsettled lists the volume's unsettled blocks in offset order.
func (v *Volume) Unsettled() []UnsettledBlock {
	p := &v.poisoned
	if !p.any.Load() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []UnsettledBlock
	for k, rows := range p.rows {
		for _, r := range rows {
			out = append(out, v.unsettledBlock(k.id, k.shard, r))
		}
	}
	slices.SortFunc(out, func(a, b UnsettledBlock) int { return int(min(max(a.Offset-b.Offset, -1), 1)) })
	return out
}

func (v *Volume) unsettledBlock(id layout.StripeID, shard int, r int64) UnsettledBlock {
	off := id.Segment*v.g.SegmentData() + id.Stripe*v.g.StripeData() + int64(shard)*v.g.Chunk + r*layout.ChecksumBlock
	return UnsettledBlock{Offset: off, Segment: id.Segment, Stripe: id.Stripe, Shard: shard}
}

// tellUnsettled calls the Unsettled listener for rows of shard of stripe
// id.
func (v *Volume) tellUnsettled(id layout.StripeID, shard int, rows []int64) {
	for _, r := range rows {
		v.ev.unsettled(v.unsettledBlock(id, shard, r))
	}
}

// stripeUnsettled reports whether stripe id holds unsettled blocks.
func (v *Volume) stripeUnsettled(id layout.StripeID) bool {
	return v.unsettled(id, -1, 0, v.g.Chunk) != nil
}

// unsettledRow reports whether row r of stripe id holds an unsettled
// block (of any data shard): its parity blocks were poisoned with it.
func (v *Volume) unsettledRow(id layout.StripeID, r int64) bool {
	return v.unsettled(id, -1, r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock) != nil
}

// mayHoldBlank reports whether row r of stripe id may hold a block a
// rebuild wrote blank (rebuildUnsettled): a known unsettled block is
// there, or the record of its segment does not list them all (More). Such
// a row is never taken for a never-written one (blankRow), though it may
// be zeros and blanks throughout (the rebuilds write the row's poisoned
// parity blank too): keeping its blank as a torn write would store zeros
// no write wrote, with a good checksum.
func (v *Volume) mayHoldBlank(id layout.StripeID, r int64) bool {
	p := &v.poisoned
	p.mu.Lock()
	more := p.more[id.Segment]
	p.mu.Unlock()
	return more || v.unsettledRow(id, r)
}

// unsettledInRow counts the unsettled blocks of row r of stripe id.
func (v *Volume) unsettledInRow(id layout.StripeID, r int64) int {
	return len(v.unsettledShards(id, r))
}

// rebuildUnsettled is rebuildChunk for a stripe with unsettled rows: the
// rebuild carries them over instead of failing, so that a move or a
// rebuild of any slot of the stripe finishes and the segment gets its
// redundancy back. Each block of slot i's chunk is the slot's own (its
// old location during a move) when that matches its checksum and is not
// unsettled; else, in a settled row, it is rebuilt from K blocks of the
// row that match theirs (proved first, as chunkFor does); else it is
// carried over unsettled: written blank, zeros with a checksum-area word
// of zero, which in format 4 no block matches and no recovery takes for a
// torn write (misplaced), so reads of it fail with class ErrCorrupt, also
// after a reopen, and the poisoned parity of the row keeps the rest from
// reconstructing it. In a re-protected row (its parity marked as encoded
// with its one unsettled block as zeros: reprotect) the row's other
// blocks are rebuilt from it instead (solveMarked), parity marked again.
// A data block carried over is recorded unsettled (Unsettled lists it;
// Settle zeroes it). Format 3 has no such blank (a
// zero block's checksum is zero there, so the blank would read as zeros):
// rebuildChunk does not call it there, and a rebuild of the unsettled
// blocks' own slot still fails with class ErrCorrupt until the stripe is
// written whole. REQUIRES: format 4, stripe lock held, s.io held shared.
func (v *Volume) rebuildUnsettled(ctx context.Context, s *segment, i int, id layout.StripeID) error {
	t, sh := id.Stripe, v.g.ShardIn(id.Stripe, i)
	usable := v.usableShards(s, id)
	img, err := v.readImage(ctx, s, id, usable)
	if err != nil {
		return err
	}
	defer img.bufs.release()
	rows := v.g.BlocksPerChunk()
	chunk := make([]byte, v.g.Chunk)
	sums := make([]uint32, rows)
	tags := v.g.SlotTags(s.id, i)
	var carried []int64
	for r := int64(0); r < rows; r++ {
		lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
		out := chunk[lo:hi]
		own := usable[sh] && blockSum(img.bufs.shards[sh][lo:hi]) == img.sums[sh][r] && v.unsettled(id, sh, lo, hi) == nil
		x, marked := 0, false
		if !own && v.unsettledRow(id, r) && v.unsettled(id, sh, lo, hi) == nil {
			x, marked = v.solveMarked(img, usable, sh, r, out)
		}
		switch {
		case own:
			copy(out, img.bufs.shards[sh][lo:hi])
		case marked && sh >= v.g.K:
			sums[r] = markedSum(tags, t*rows+r, out, x) // still encoded with x as zeros
			continue
		case marked:
		case v.unsettledRow(id, r) && v.unsettled(id, sh, lo, hi) == nil && v.markedLater(img, usable, sh, r):
			// Not lost: shards now away may rebuild it once back. Written
			// blank, an acknowledged block would be lost for good.
			return fmt.Errorf("segment %d stripe %d shard %d block %d: its row holds an unsettled block and too few of its other blocks are reachable to rebuild it: %w",
				s.id, t, sh, r, v.stripeError(s, id, usable))
		case !v.unsettledRow(id, r):
			if err := v.proveSpan(ctx, s, id, lo, hi); err != nil {
				return err
			}
			if !v.solveClean(img, usable, sh, r, out) {
				return fmt.Errorf("segment %d stripe %d shard %d block %d: fewer than %d blocks of its row match their checksums: %w",
					s.id, t, sh, r, v.g.K, v.stripeError(s, id, usable))
			}
		default:
			clear(out)
			sums[r] = tags.Of(t*rows + r) // stored as zero: blank
			if sh < v.g.K {
				carried = append(carried, r)
			}
			continue
		}
		sums[r] = blockSum(out)
	}
	if err := v.slotWrite(ctx, s.slots[i], t, 0, chunk, sums, false); err != nil {
		return v.shardFailed(s, s.slots[i], i, t, err)
	}
	if len(carried) > 0 {
		return v.poisonMore(ctx, id, sh, carried)
	}
	return nil
}

// Re-protecting an unsettled row. Its unsettled block x has no value a
// read may return, but its other blocks do, acknowledged ones among them,
// and before they had only their own copies: the row's parity was left
// for a version of the row that is gone, so a namespace lost later lost
// them too (a rebuild wrote them blank). So the row's parity is encoded
// again with x taken as zeros (reprotect), and stored with a checksum
// that differs from the block's own by reprotectMark(x). To every reader
// that does not know the mark such a parity block fails its check as a
// poisoned one does (poisonParity), so that x is never rebuilt from it,
// as zeros or as anything else, also after the record of unsettled
// blocks is lost. A rebuild of another block of the row knows it
// (solveMarked): with x as zeros, the marked parity rebuilds the others.

// reprotectMark is what the stored checksum of a parity block encoded
// with data shard x as zeros differs from the block's own by. Its high
// bits are set, so it is never taken for a block written for another slot
// (SlotTags.Misplaced); markedSum keeps it from being taken for a blank.
func reprotectMark(x int) uint32 { return 0x7e9a5c00 | uint32(x) }

// isMarked reports whether diff, a parity block's checksum xored with the
// one stored for it, is a mark of reprotect.
func isMarked(diff uint32) bool { return diff&^0xff == reprotectMark(0) }

// markedSum is the checksum to store for parity block b, block block of
// its slot (tags), encoded with data shard x as zeros. Where the mark
// would make the block look blank (it equals the block's tag), the block
// is poisoned plainly instead: still no reader takes it for good.
func markedSum(tags layout.SlotTags, block int64, b []byte, x int) uint32 {
	mark := reprotectMark(x)
	if tags.Bound() && tags.Of(block) == mark {
		mark = ^uint32(0)
	}
	return blockSum(b) ^ mark
}

// reprotect encodes the parity of rows of stripe id again from its data
// blocks, with data shard x taken as zeros, and writes it to every usable
// parity shard with a marked checksum (markedSum). img holds the data as
// the stripe's settling left it. REQUIRES: stripe lock held.
func (v *Volume) reprotect(ctx context.Context, s *segment, id layout.StripeID, usable []bool, img *stripeImage, x int, rows []int64) error {
	n := v.g.N()
	zeros := make([]byte, layout.ChecksumBlock)
	for _, r := range rows {
		lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
		row := make([][]byte, n)
		for sh := range n {
			switch {
			case sh == x:
				row[sh] = zeros
			case sh < v.g.K:
				row[sh] = img.bufs.shards[sh][lo:hi]
			default:
				row[sh] = make([]byte, layout.ChecksumBlock)
			}
		}
		if err := v.codec.Encode(row); err != nil {
			return err
		}
		block := id.Stripe*v.g.BlocksPerChunk() + r
		for sh := v.g.K; sh < n; sh++ {
			if !usable[sh] {
				continue // its copies miss the stripe (missedSettle): rebuilt marked
			}
			sum := markedSum(img.tags[sh], block, row[sh], x)
			if err := v.shardWrite(ctx, s, id, sh, row[sh], []uint32{sum}, lo, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// solveMarked rebuilds block r of shard target of a re-protected row into
// out: from the row's one listed unsettled data block x taken as zeros,
// the data blocks that match their checksums and the parity blocks marked
// as encoded with x as zeros, when they are at least K and, past K, agree
// with each other (as a heal's rule, rebuildSound). It returns x.
func (v *Volume) solveMarked(img *stripeImage, usable []bool, target int, r int64, out []byte) (int, bool) {
	xs := v.unsettledShards(img.id, r)
	if len(xs) != 1 {
		return 0, false
	}
	x, n := xs[0], v.g.N()
	lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
	blocks, present := make([][]byte, n), make([]bool, n)
	for sh := range n {
		diff := uint32(1)
		if usable[sh] {
			diff = blockSum(img.bufs.shards[sh][lo:hi]) ^ img.sums[sh][r]
		}
		switch {
		case sh == target:
		case sh == x:
			blocks[sh], present[sh] = make([]byte, layout.ChecksumBlock), true
		case (sh < v.g.K && diff == 0) || (sh >= v.g.K && diff == reprotectMark(x)):
			blocks[sh], present[sh] = img.bufs.shards[sh][lo:hi], true
		}
	}
	if count(present) < v.g.K || (count(present) > v.g.K && !v.rowAgrees(blocks, present, -1)) {
		return 0, false
	}
	b := v.rebuildWithout(blocks, present, target)
	if b == nil {
		return 0, false
	}
	copy(out, b)
	return x, true
}

// markedLater reports whether block r of shard target of a row with one
// listed unsettled block, which solveMarked could not rebuild now, could
// be rebuilt once the shards now unusable are back: with them counted as
// good, the row would have K blocks. A row that cannot reach K even so
// (its parity poisoned plainly, two unsettled blocks) has lost the block.
func (v *Volume) markedLater(img *stripeImage, usable []bool, target int, r int64) bool {
	xs := v.unsettledShards(img.id, r)
	if len(xs) != 1 {
		return false
	}
	x := xs[0]
	lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
	n := 0
	for sh := range v.g.N() {
		switch {
		case sh == target:
		case sh == x || !usable[sh]:
			n++
		case sh < v.g.K && blockSum(img.bufs.shards[sh][lo:hi]) == img.sums[sh][r]:
			n++
		case sh >= v.g.K && blockSum(img.bufs.shards[sh][lo:hi])^img.sums[sh][r] == reprotectMark(x):
			n++
		}
	}
	return n >= v.g.K
}

// readMarked reads sio block by block from an image of its stripe, after
// a read that failed on checksums in a stripe with unsettled rows: a
// block of another shard of such a row, its own shard down, has only the
// marked parity to be rebuilt from, which the read path does not trust
// (reprotect). Each block comes from its own shard when that is usable
// and matches its checksum, else, in a row with an unsettled block, is
// rebuilt with the marked parity (solveMarked). Any other block fails it
// (the caller keeps the read's error). REQUIRES: stripe lock held.
func (v *Volume) readMarked(ctx context.Context, s *segment, sio layout.StripeIO, p []byte, base int64) error {
	usable := v.usableShards(s, sio.ID)
	img, err := v.readImage(ctx, s, sio.ID, usable)
	if err != nil {
		return err
	}
	defer img.bufs.release()
	blk := make([]byte, layout.ChecksumBlock)
	for _, pc := range sio.Pieces {
		for off := pc.Off; off < pc.Off+pc.Len; {
			r := off / layout.ChecksumBlock
			lo, end := r*layout.ChecksumBlock, min((r+1)*layout.ChecksumBlock, pc.Off+pc.Len)
			switch {
			case usable[pc.Shard] && blockSum(img.bufs.shards[pc.Shard][lo:lo+layout.ChecksumBlock]) == img.sums[pc.Shard][r]:
				copy(blk, img.bufs.shards[pc.Shard][lo:])
			case !v.unsettledRow(sio.ID, r):
				return errNotMarked
			default:
				if _, ok := v.solveMarked(img, usable, pc.Shard, r, blk); !ok {
					return errNotMarked
				}
			}
			copy(p[pc.Buf-base+off-pc.Off:], blk[off-lo:end-lo])
			off = end
		}
	}
	return nil
}

// errNotMarked: a block readMarked cannot read.
var errNotMarked = errors.New("not a block of a re-protected row")

// unsettledShards returns the data shards with a listed unsettled block
// in row r of stripe id.
func (v *Volume) unsettledShards(id layout.StripeID, r int64) []int {
	p := &v.poisoned
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for k, rows := range p.rows {
		if _, found := slices.BinarySearch(rows, r); found && k.id == id {
			out = append(out, k.shard)
		}
	}
	return out
}

// poisonSet holds the blocks recoveries could not settle, and what of
// them the UnsettledLog records (unsettled_log.go): the blanks rebuilds
// wrote. A block a recovery found unsettled is not recorded: its segment
// stays dirty, and the next owner's recovery finds it again from the
// shards as they are, or settles it when it reaches what this one could
// not (a namespace it was cut off from). A blank is for good: nothing
// but the record tells it from bad media after that.
type poisonSet struct {
	any  atomic.Bool // rows or unsynced is not empty
	mu   sync.Mutex
	rows map[poisonKey][]int64
	// blank: of rows, those written blank (rebuildUnsettled) or loaded
	// from the record. recorded: by segment, the blocks its record lists.
	// more: the segments whose record loaded said they have blocks past
	// those.
	blank    map[poisonKey][]int64
	recorded map[int64]int
	more     map[int64]bool
	// unsynced: the segments whose last record rewrite failed (the log
	// may hold blocks settled since).
	unsynced map[int64]bool
	// logMu serialises changes that rewrite a record (changeUnsettled);
	// loaded: LoadUnsettled ran. Both guarded by logMu.
	logMu  sync.Mutex
	loaded bool
	// limit bounds the blocks recorded (0: MaxRecordedUnsettled; tests
	// set less).
	limit int
}

type poisonKey struct {
	id    layout.StripeID
	shard int
}

// init makes the maps. REQUIRES: p.mu held.
func (p *poisonSet) init() {
	if p.rows == nil {
		p.rows, p.blank, p.recorded, p.more = map[poisonKey][]int64{}, map[poisonKey][]int64{}, map[int64]int{}, map[int64]bool{}
		p.unsynced = map[int64]bool{}
	}
}

// union returns the sorted, distinct rows of a and b.
func union(a, b []int64) []int64 {
	return slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(a), b...))))
}

// record returns the record of segment seg: its blocks in order, as many
// as MaxRecordedUnsettled leaves after the other segments' records, and
// More when some did not fit or a record loaded said so. It notes how
// many it lists. REQUIRES: p.mu held.
func (p *poisonSet) record(seg int64) UnsettledSegment {
	rec := UnsettledSegment{Segment: seg, More: p.more[seg]}
	for k, rows := range p.blank {
		if k.id.Segment != seg {
			continue
		}
		for _, r := range rows {
			rec.Blocks = append(rec.Blocks, UnsettledRow{Stripe: k.id.Stripe, Shard: k.shard, Row: r})
		}
	}
	slices.SortFunc(rec.Blocks, compareRows)
	room := cmp.Or(p.limit, MaxRecordedUnsettled)
	for s, n := range p.recorded {
		if s != seg {
			room -= n
		}
	}
	if room = max(room, 0); len(rec.Blocks) > room {
		rec.Blocks, rec.More = rec.Blocks[:room], true
	}
	p.recorded[seg] = len(rec.Blocks)
	if len(rec.Blocks) == 0 {
		delete(p.recorded, seg)
	}
	return rec
}

// poison makes rows the unsettled blocks of shard of stripe id that a
// recovery found (with the blanks known there) and tells them. They are
// not recorded (poisonSet).
func (v *Volume) poison(id layout.StripeID, shard int, rows []int64) {
	p := &v.poisoned
	p.mu.Lock()
	p.init()
	k := poisonKey{id, shard}
	p.rows[k] = union(rows, p.blank[k])
	p.any.Store(true)
	p.mu.Unlock()
	v.tellUnsettled(id, shard, rows)
}

// poisonMore adds rows, written blank, to the unsettled blocks of shard of
// stripe id, records them in the UnsettledLog and tells them.
func (v *Volume) poisonMore(ctx context.Context, id layout.StripeID, shard int, rows []int64) error {
	err := v.changeUnsettled(ctx, id.Segment, func(p *poisonSet) bool {
		k := poisonKey{id, shard}
		p.rows[k], p.blank[k] = union(p.rows[k], rows), union(p.blank[k], rows)
		return true
	})
	v.tellUnsettled(id, shard, rows)
	return err
}

// settled forgets the unsettled blocks of stripe id, in memory and in the
// UnsettledLog, before a write of the whole stripe replaces them, and its
// parity, with good ones.
func (v *Volume) settled(ctx context.Context, id layout.StripeID) error {
	return v.settledStripes(ctx, id.Segment, id.Stripe, id.Stripe)
}

// settledStripes is settled for stripes [first, last] of segment seg
// (zeroed whole: every shard, parity too).
func (v *Volume) settledStripes(ctx context.Context, seg, first, last int64) error {
	if !v.poisoned.any.Load() {
		return nil
	}
	return v.changeUnsettled(ctx, seg, func(p *poisonSet) bool {
		changed := false
		for k := range p.rows {
			if k.id.Segment == seg && k.id.Stripe >= first && k.id.Stripe <= last {
				_, recorded := p.blank[k]
				delete(p.rows, k)
				delete(p.blank, k)
				changed = changed || recorded
			}
		}
		return changed
	})
}

// Settle resets to zeros every block of segments [first, last] that
// cannot be read back (class ErrCorrupt): the unsettled blocks, and any
// other lost beyond what parity rebuilds. Each stripe holding one is read
// block by block and written back whole, the lost blocks zeroed: a
// whole-stripe write stores a good parity and checksums again, so the
// stripe reads, rebuilds and moves as any other. It returns the volume
// offsets of the blocks it reset, in order; the other blocks keep their
// data. progress (nil: none) hears the stripes done of the total. Any
// other read error stops it (the blocks reset so far are returned with
// it): a block of a missing namespace is not lost, only away.
// REQUIRES: no other IO on the volume (the caller holds it alone): a write
// between the read of a stripe and its rewrite would be lost.
func (v *Volume) Settle(ctx context.Context, first, last int64, progress func(done, total int64)) ([]int64, error) {
	var reset []int64
	spseg := v.g.StripesPerSegment()
	total := (last - first + 1) * spseg
	for seg := first; seg <= last && seg*v.g.SegmentData() < v.Size(); seg++ {
		for t := int64(0); t < spseg; t++ {
			off := seg*v.g.SegmentData() + t*v.g.StripeData()
			if off >= v.Size() {
				break
			}
			lost, err := v.settleStripeAt(ctx, off)
			reset = append(reset, lost...)
			if err != nil {
				return reset, err
			}
			if progress != nil {
				progress((seg-first)*spseg+t+1, total)
			}
		}
		// Every block of the segment reads back now: its record goes,
		// More (blocks past those it listed) included.
		if err := v.forgetUnsettled(ctx, seg); err != nil {
			return reset, err
		}
	}
	return reset, nil
}

// settleStripeAt is Settle for the stripe at volume offset off.
func (v *Volume) settleStripeAt(ctx context.Context, off int64) ([]int64, error) {
	buf := make([]byte, min(v.g.StripeData(), v.Size()-off))
	err := v.ReadAt(ctx, buf, off)
	if err == nil || !errors.Is(err, blockdev.ErrCorrupt) {
		return nil, err
	}
	var lost []int64
	for at := int64(0); at < int64(len(buf)); at += layout.ChecksumBlock {
		b := buf[at : at+layout.ChecksumBlock]
		err := v.ReadAt(ctx, b, off+at)
		switch {
		case errors.Is(err, blockdev.ErrCorrupt):
			clear(b)
			lost = append(lost, off+at)
		case err != nil:
			return nil, err
		}
	}
	if err := v.WriteAt(ctx, buf, off); err != nil {
		return nil, fmt.Errorf("rewriting the stripe at %d with %d lost blocks zeroed: %w", off, len(lost), err)
	}
	return lost, nil
}
