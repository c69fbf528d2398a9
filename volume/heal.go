package volume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/nvstripe/nvstripe/volume/layout"
)

// healMode says what a stripe heal may assume about the stripe.
type healMode int

const (
	// healRead: a read found a block that does not match its checksum; no
	// write was torn, so only blocks the other shards prove wrong change.
	healRead healMode = iota
	// healScrub: as healRead, and parity must agree with the data.
	healScrub
	// healResync: the segment was dirty at a crash, so a write may have
	// left a block and its checksum, or data and parity, on different
	// versions. Parity is recomputed from the data.
	healResync
)

// ChecksumStats counts what checksum verification found since the volume
// was opened.
type ChecksumStats struct {
	Mismatches int64 // blocks that did not match their checksum
	Healed     int64 // of those, rewritten from the other shards
	Unhealed   int64 // of those, left bad: more than M shards of the row were bad
	Torn       int64 // blocks of dirty segments taken as they are after a crash
	Parity     int64 // parity chunks a scrub or resync found out of step and rewrote
	// Stale counts blocks that matched their checksums but not the other
	// shards of their row, which agreed without them (a device that lost
	// a write, prove.go): rebuilt from the others.
	Stale int64
	// Unsettled counts the known unsettled blocks (Volume.Unsettled) a
	// scrub passed over: not bad blocks, nothing to heal there.
	Unsettled int64
}

type checksumCounters struct{ mismatches, healed, unhealed, torn, parity, stale, unsettled atomic.Int64 }

// add adds what one heal found to the counters.
func (c *checksumCounters) add(t *healTally) {
	c.mismatches.Add(t.Mismatches)
	c.healed.Add(t.Healed)
	c.unhealed.Add(t.Unhealed)
	c.torn.Add(t.Torn)
	c.parity.Add(t.Parity)
	c.stale.Add(t.Stale)
	c.unsettled.Add(t.Unsettled)
}

// healTally is what one heal of one stripe found, in the terms of
// ChecksumStats, and the rows it left disputed (counted in Unhealed).
type healTally struct {
	ChecksumStats
	disputed int64
}

// ScrubStats is what one Scrub found itself, apart from what foreground
// IO found meanwhile (ChecksumStats counts both). Found == Healed +
// Unhealed: a scrub keeps no block as a torn write.
type ScrubStats struct {
	Stripes int64 // stripes checked
	// Found counts the bad blocks: those that did not match their
	// checksums, those that matched them but not the rest of their row
	// (Stale), and one per row whose blocks match their checksums but
	// not each other with nothing to tell which is stale.
	Found    int64
	Healed   int64 // of Found, rewritten from the other shards
	Unhealed int64 // of Found, left bad: reads of them fail with class ErrCorrupt
	Stale    int64 // of Healed, blocks that matched their checksums but not their row
	Parity   int64 // parity chunks out of step with good data, rewritten
	// Unsettled counts the known unsettled blocks (Volume.Unsettled) it
	// passed over: not in Found, nothing to heal there.
	Unsettled int64
}

// add adds what the heal of one stripe found.
func (st *ScrubStats) add(t healTally) {
	st.Stripes++
	st.Found += t.Mismatches + t.Stale + t.disputed
	st.Healed += t.Healed
	st.Unhealed += t.Unhealed
	st.Stale += t.Stale
	st.Parity += t.Parity
	st.Unsettled += t.Unsettled
}

// Add adds o to st (the totals of a scrub run segment by segment).
func (st *ScrubStats) Add(o ScrubStats) {
	st.Stripes += o.Stripes
	st.Found += o.Found
	st.Healed += o.Healed
	st.Unhealed += o.Unhealed
	st.Stale += o.Stale
	st.Parity += o.Parity
	st.Unsettled += o.Unsettled
}

// ChecksumStats returns the checksum counters.
func (v *Volume) ChecksumStats() ChecksumStats {
	c := &v.csum
	return ChecksumStats{Mismatches: c.mismatches.Load(), Healed: c.healed.Load(),
		Unhealed: c.unhealed.Load(), Torn: c.torn.Load(), Parity: c.parity.Load(), Stale: c.stale.Load(), Unsettled: c.unsettled.Load()}
}

// ChecksumInfo describes the bad blocks one heal found in one shard of a
// stripe.
type ChecksumInfo struct {
	NS      string
	Segment int64
	Slot    int
	Stripe  int64
	Offset  int64  // byte offset of the first bad block in the namespace
	Blocks  int    // bad blocks in the shard's chunk
	Healed  int    // of those, rewritten (data or checksum) from the other shards
	Torn    int    // of those, taken as they are (resync of a dirty segment)
	FoundBy string // what found them: "read" (foreground IO), "scrub" or "resync"
	// Unsettled: of those, left bad in a segment whose resync after an
	// unclean stop is still pending (Recover deferred it): a write torn by
	// the crash is as likely there as bad media, so they say nothing of
	// the namespace.
	Unsettled int
	// Stale: of those, blocks that matched their checksums but not the
	// rest of their row (a device that lost an acknowledged write),
	// rebuilt from the others (prove.go).
	Stale int
}

// foundBy names a heal mode in ChecksumInfo.FoundBy.
func (m healMode) foundBy() string {
	switch m {
	case healScrub:
		return "scrub"
	case healResync:
		return "resync"
	}
	return "read"
}

// stripeImage is every usable shard of one stripe, read whole, with the
// stored checksums of its blocks.
type stripeImage struct {
	id    layout.StripeID
	seg   *segment          // read from: its proven rows (prove.go)
	tags  []layout.SlotTags // by shard: the tags of its slot (format 4)
	bufs  *stripeBufs
	sums  [][]uint32 // by shard and block; read only for usable shards
	fixed [][]bool   // by shard and block: rewrite this block
	bad   [][]bool   // by shard and block: did not match its checksum
	torn  [][]bool   // by shard and block: kept as it is by a resync
	// disputed, by block: the row's blocks match their checksums but not
	// each other, and nothing tells which is stale (proveImage): parity is
	// left as it is, so that reads of the row keep failing.
	disputed []bool
	found    healTally // what this heal found
}

// healStripe checks every block of every usable shard of stripe id against
// its stored checksum. A block that does not match is rebuilt from the
// other shards of its row (the same block offset in every shard) that do
// match, and rewritten with its checksum: with no write in flight the stripe
// is consistent, so K verified shards determine the rest. With fewer than K
// verified shards in the row the block is left alone and counted unhealed
// (reads of it then fail with class ErrCorrupt).
//
// In healResync (a dirty segment after a crash) data and parity may hold
// different versions, so a rebuilt block is trusted only with a second
// witness: it matches the stored checksum (the block was torn or bad), or
// it equals the block as read (the checksum was). Otherwise the block is
// the torn write of an unacknowledged request: the data is kept, its
// checksum rewritten, and parity re-encoded from it (docs/architecture.md).
// REQUIRES: stripe lock held, s.io held shared.
func (v *Volume) healStripe(ctx context.Context, s *segment, id layout.StripeID, mode healMode) error {
	_, err := v.healStripeIn(ctx, s, id, mode, nil)
	return err
}

// healStripeIn is healStripe with what a resync knows of the writes since
// the stripe's last flush (nil: nothing). It returns what it found, which
// it also adds to the volume's counters (ChecksumStats).
func (v *Volume) healStripeIn(ctx context.Context, s *segment, id layout.StripeID, mode healMode, ep *epochRows) (healTally, error) {
	usable := v.usableShards(s, id)
	if mode == healResync {
		for sh := 0; sh < v.g.K; sh++ {
			if !usable[sh] {
				return healTally{}, fmt.Errorf("segment %d stripe %d: resync needs every data shard: %w", s.id, id.Stripe, v.stripeError(s, id, usable))
			}
		}
	}
	img, err := v.readImage(ctx, s, id, usable)
	if err != nil {
		return healTally{}, err
	}
	defer img.bufs.release()
	err = v.healImage(ctx, s, img, usable, mode, ep)
	v.csum.add(&img.found)
	return img.found, err
}

// healImage is healStripeIn on the stripe image it read.
func (v *Volume) healImage(ctx context.Context, s *segment, img *stripeImage, usable []bool, mode healMode, ep *epochRows) error {
	id := img.id
	for r := int64(0); r < v.g.BlocksPerChunk(); r++ {
		if mode != healResync && v.unsettledRow(id, r) {
			img.disputed[r] = true // known lost (Volume.Unsettled): nothing to heal or count, parity left alone
			if mode == healScrub {
				img.found.Unsettled += int64(v.unsettledInRow(id, r))
			}
			continue
		}
		v.healRow(img, usable, r, mode)
	}
	if mode != healRead {
		v.proveImage(s, img, usable, mode, ep)
	}
	v.reportHeal(s, id, img, mode)
	parity := mode == healResync || (mode == healScrub && count(usable) == v.g.N())
	if parity && v.g.M > 0 {
		if err := v.fixParity(img, usable, mode); err != nil {
			return err
		}
	}
	return v.writeFixes(ctx, s, id, img)
}

// readImage reads every usable shard of the stripe whole, without
// verifying, and the stored checksums of its blocks.
func (v *Volume) readImage(ctx context.Context, s *segment, id layout.StripeID, usable []bool) (*stripeImage, error) {
	n, rows := v.g.N(), v.g.BlocksPerChunk()
	img := &stripeImage{id: id, seg: s, tags: make([]layout.SlotTags, n), bufs: &stripeBufs{v: v, shards: make([][]byte, n)},
		sums: make([][]uint32, n), fixed: make([][]bool, n), bad: make([][]bool, n), torn: make([][]bool, n)}
	sums, marks := make([]uint32, int64(n)*rows), make([]bool, 3*int64(n)*rows+rows) // one allocation each: a scrub reads every stripe
	img.disputed = marks[3*int64(n)*rows:]
	for sh := range n {
		img.bufs.alloc(sh, v.g.Chunk)
		m := marks[3*int64(sh)*rows:]
		img.fixed[sh], img.bad[sh], img.torn[sh] = m[:rows:rows], m[rows:2*rows:2*rows], m[2*rows:3*rows:3*rows]
		img.sums[sh] = sums[int64(sh)*rows : int64(sh+1)*rows : int64(sh+1)*rows]
		img.tags[sh] = s.slots[v.g.SlotOf(id.Stripe, sh)].sums.tags
	}
	err := v.each(n, func(sh int) error {
		if !usable[sh] {
			return nil
		}
		i := v.g.SlotOf(id.Stripe, sh)
		sl := s.readSlot(i, id.Stripe)
		if sl == nil {
			return &shardFault{err: fmt.Errorf("segment %d slot %d: no usable copy: %w", s.id, i, errNoCopy)}
		}
		err := sl.dev.ReadAt(ctx, img.bufs.shards[sh], v.g.SlotOffset(id))
		if err == nil {
			err = v.storedSums(ctx, sl, id.Stripe, 0, img.sums[sh])
		}
		return v.shardFailed(s, sl, i, id.Stripe, err)
	})
	if err != nil {
		img.bufs.release()
		return nil, err
	}
	return img, nil
}

// errNoCopy is the cause of a shard fault on a slot with no copy serving
// the stripe (it went stale or down meanwhile).
var errNoCopy = errors.New("no copy serves the stripe")

// healRow checks and heals block r of every usable shard.
func (v *Volume) healRow(img *stripeImage, usable []bool, r int64, mode healMode) {
	n := v.g.N()
	lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
	var bad []int
	for sh := range n {
		if usable[sh] && blockSum(img.bufs.shards[sh][lo:hi]) != img.sums[sh][r] {
			bad = append(bad, sh)
			img.bad[sh][r] = true
		}
	}
	if len(bad) == 0 {
		return
	}
	img.found.Mismatches += int64(len(bad))
	var rebuilt [][]byte
	if v.rebuildSound(img, usable, bad, r, mode) {
		rebuilt = v.rebuildRow(img, usable, bad, lo, hi)
	}
	unwritten := mode == healResync && !v.mayHoldBlank(img.id, r) && v.blankRow(img, usable, r)
	for _, sh := range bad {
		got := img.bufs.shards[sh][lo:hi]
		// In a resync a bad block may be a torn write, kept unless the
		// other shards say otherwise; never one that is blank or was
		// written for another slot, unless the row is a never-written
		// one (blankRow: an allocation cut short).
		torn := unwritten || (mode == healResync && !v.misplaced(img, sh, r))
		switch {
		case rebuilt != nil && (!torn || blockSum(rebuilt[sh]) == img.sums[sh][r]):
			copy(got, rebuilt[sh]) // the block (or its checksum, or both) was bad
		case rebuilt != nil && bytes.Equal(rebuilt[sh], got):
			// the checksum was bad: rewriting the block rewrites it
		case torn:
			img.found.Torn++ // data kept; parity is re-encoded from it
			img.fixed[sh][r] = sh < v.g.K
			img.torn[sh][r] = true
			continue
		default:
			img.found.Unhealed++
			continue
		}
		img.fixed[sh][r] = true
		img.found.Healed++
	}
}

// misplaced reports whether block r of shard sh, which does not match its
// checksum, is blank (zeros in data and checksum area) or was written with
// its checksum for another slot of the segment: in format 4 neither can be
// a torn write.
func (v *Volume) misplaced(img *stripeImage, sh int, r int64) bool {
	tags := img.tags[sh]
	if !tags.Bound() {
		return false
	}
	lo := r * layout.ChecksumBlock
	diff := blockSum(img.bufs.shards[sh][lo:lo+layout.ChecksumBlock]) ^ img.sums[sh][r]
	block := img.id.Stripe*v.g.BlocksPerChunk() + r
	return (diff == tags.Of(block) && allZero(img.bufs.shards[sh][lo:lo+layout.ChecksumBlock])) || tags.Misplaced(diff, v.g.N())
}

// blankRow reports whether block r of every usable shard is zeros, either
// blank (format 4) or matching a zero block's checksum, with at least one
// blank: a row never written since an allocation whose writing of the
// checksum areas was cut short.
func (v *Volume) blankRow(img *stripeImage, usable []bool, r int64) bool {
	lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
	block := img.id.Stripe*v.g.BlocksPerChunk() + r
	blank := false
	for sh, u := range usable {
		if !u {
			continue
		}
		tags := img.tags[sh]
		if !tags.Bound() || !allZero(img.bufs.shards[sh][lo:hi]) {
			return false
		}
		switch img.sums[sh][r] {
		case tags.Of(block):
			blank = true
		case 0: // a zero block's checksum
		default:
			return false
		}
	}
	return blank
}

// allZero reports whether b holds only zeros.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// rebuildRow reconstructs block range [lo, hi) of the bad shards from the
// usable good ones, or returns nil when fewer than K are good.
func (v *Volume) rebuildRow(img *stripeImage, usable []bool, bad []int, lo, hi int64) [][]byte {
	n := v.g.N()
	shards := make([][]byte, n)
	want := make([]bool, n)
	good := 0
	for sh := range n {
		if usable[sh] && !contains(bad, sh) {
			shards[sh] = img.bufs.shards[sh][lo:hi]
			good++
		}
	}
	if good < v.g.K {
		return nil
	}
	for _, sh := range bad {
		want[sh] = true
		shards[sh] = make([]byte, 0, hi-lo)
	}
	if err := v.codec.ReconstructRange(shards, want); err != nil {
		return nil
	}
	return shards
}

// fixParity encodes parity from the (healed) data and marks the parity
// blocks that differ from what the stripe holds for rewriting. In a scrub,
// rows where a block stayed bad are left alone.
func (v *Volume) fixParity(img *stripeImage, usable []bool, mode healMode) error {
	n := v.g.N()
	enc := &stripeBufs{v: v, shards: make([][]byte, n)} // parity from pooled buffers: a scrub encodes every stripe
	defer enc.release()
	for sh := range n {
		if sh < v.g.K {
			enc.shards[sh] = img.bufs.shards[sh]
		} else {
			enc.alloc(sh, v.g.Chunk)
		}
	}
	if err := v.codec.Encode(enc.shards); err != nil {
		return err
	}
	changed := false
	for sh := v.g.K; sh < n; sh++ {
		if !usable[sh] {
			continue
		}
		for r := int64(0); r < v.g.BlocksPerChunk(); r++ {
			lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
			if v.rowUnhealed(img, r) {
				continue // never parity to match data that did not verify
			}
			if !bytes.Equal(enc.shards[sh][lo:hi], img.bufs.shards[sh][lo:hi]) || img.bad[sh][r] {
				copy(img.bufs.shards[sh][lo:hi], enc.shards[sh][lo:hi])
				img.fixed[sh][r] = true
				changed = true
			}
		}
	}
	if changed {
		img.found.Parity++
	}
	return nil
}

// rowUnhealed reports whether a block of row r stayed bad (not healed,
// and not kept as a torn write by a resync).
func (v *Volume) rowUnhealed(img *stripeImage, r int64) bool {
	if img.disputed[r] {
		return true
	}
	for sh := range img.bad {
		if img.bad[sh][r] && !img.fixed[sh][r] && !img.torn[sh][r] {
			return true
		}
	}
	return false
}

// writeFixes rewrites every block marked fixed, with its checksum, to
// every copy of its slot.
func (v *Volume) writeFixes(ctx context.Context, s *segment, id layout.StripeID, img *stripeImage) error {
	return v.each(v.g.N(), func(sh int) error {
		for r := int64(0); r < v.g.BlocksPerChunk(); {
			if !img.fixed[sh][r] {
				r++
				continue
			}
			end := r + 1
			for end < v.g.BlocksPerChunk() && img.fixed[sh][end] {
				end++
			}
			lo, hi := r*layout.ChecksumBlock, end*layout.ChecksumBlock
			if err := v.shardWrite(ctx, s, id, sh, img.bufs.shards[sh][lo:hi], nil, lo, false); err != nil {
				return err
			}
			r = end
		}
		return nil
	})
}

// reportHeal calls the Checksum listener once per shard with bad blocks.
func (v *Volume) reportHeal(s *segment, id layout.StripeID, img *stripeImage, mode healMode) {
	if v.ev.Checksum == nil {
		return
	}
	pending := mode != healResync && v.resyncPending(s.id)
	for sh := range img.bad {
		info := ChecksumInfo{Segment: s.id, Slot: v.g.SlotOf(id.Stripe, sh), Stripe: id.Stripe, Offset: -1, FoundBy: mode.foundBy()}
		info.NS = s.slots[info.Slot].ref.NS
		for r, b := range img.bad[sh] {
			if !b {
				continue
			}
			if info.Offset < 0 {
				info.Offset = s.slots[info.Slot].ref.Slot*v.g.SlotSize + v.g.SlotOffset(id) + int64(r)*layout.ChecksumBlock
			}
			info.Blocks++
			switch {
			case img.torn[sh][r]:
				info.Torn++
			case img.fixed[sh][r]:
				info.Healed++
			case pending:
				info.Unsettled++
			}
		}
		if info.Blocks > 0 {
			v.ev.Checksum(info)
		}
	}
}

// isChecksumFault reports whether err is a block that did not match its
// checksum.
func isChecksumFault(err error) bool {
	if err == nil {
		return false // errors.As would allocate its target on every IO
	}
	var c *ChecksumError
	return errors.As(err, &c)
}

// Scrub checks every stripe of every allocated segment in [first, last]
// against its checksums and parity and heals what it can, one stripe at a
// time under its lock (foreground IO to other stripes goes on), then
// rebuilds the segment's slots that miss stripes (a read error made this
// volume distrust them; see Repair). pace, when set, is called before each
// stripe with the bytes it reads. It returns what the checking of the
// stripes found, up to an error too; what foreground IO found meanwhile,
// and what the rebuild of missed stripes found when it read them, count
// in ChecksumStats only.
func (v *Volume) Scrub(ctx context.Context, first, last int64, pace func(ctx context.Context, n int64) error) (ScrubStats, error) {
	var st ScrubStats
	if !v.g.Checksums {
		return st, fmt.Errorf("scrub: volume has no checksums (made before format 2): %w", errNoChecksums)
	}
	for seg := first; seg <= last; seg++ {
		err := v.scrubSegment(ctx, seg, pace, &st)
		if err == nil {
			err = v.repairSegment(ctx, seg)
		}
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

var errNoChecksums = errors.New("no checksums")

func (v *Volume) scrubSegment(ctx context.Context, seg int64, pace func(ctx context.Context, n int64) error, st *ScrubStats) error {
	s, err := v.acquire(ctx, seg, false)
	if err != nil || s == nil {
		return err
	}
	defer s.io.RUnlock()
	for t := int64(0); t < v.g.StripesPerSegment(); t++ {
		if pace != nil {
			if err := pace(ctx, int64(v.g.N())*v.g.Chunk); err != nil {
				return err
			}
		}
		if err := v.scrubStripe(ctx, s, t, st); err != nil {
			return err
		}
	}
	return nil
}

// scrubStripe heals stripe t of s and adds what it found to st. Of the
// attempts a shard fault cut short, only the last counts: the next one
// reads the stripe again and finds again what the last did not rewrite.
func (v *Volume) scrubStripe(ctx context.Context, s *segment, t int64, st *ScrubStats) error {
	var last healTally
	err := v.retryStripe(s, t, func(id layout.StripeID) error {
		var err error
		last, err = v.healStripeIn(ctx, s, id, healScrub, nil)
		return err
	})
	if err == nil {
		st.add(last)
	}
	return err
}
