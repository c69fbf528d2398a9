package volume

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// resyncLogged is Resync for a volume with a write log: every stripe of
// the dirty segment is settled (settleStripe), also around a missing data
// shard. It returns the stripes it could not settle, joined (each a
// *StripeError or an *UnsettledError), after settling all the others.
// REQUIRES: s.io held shared.
func (v *Volume) resyncLogged(ctx context.Context, s *segment) error {
	recs, scanned, err := v.scanLog(ctx, s)
	if err != nil {
		return err
	}
	var deferred []error
	for t := int64(0); t < v.g.StripesPerSegment(); t++ {
		err := v.settleStripe(ctx, s, t, recs[t], scanned)
		if isDeferral(err) {
			deferred = append(deferred, err)
			continue
		}
		if err != nil {
			return err
		}
	}
	return errors.Join(deferred...)
}

// isDeferral reports whether err leaves a stripe for a later Recover.
func isDeferral(err error) bool {
	var se *StripeError
	var ue *UnsettledError
	return errors.As(err, &se) || errors.As(err, &ue)
}

// scanLog reads the write-log area of every reachable slot of s and
// returns the newest live record of each stripe, and which slots' areas
// it read.
func (v *Volume) scanLog(ctx context.Context, s *segment) (map[int64]*logRecord, []bool, error) {
	out := map[int64]*logRecord{}
	scanned := make([]bool, len(s.slots))
	for i, sl := range s.slots {
		if sl.ns.down.Load() {
			continue
		}
		buf := make([]byte, v.g.LogArea())
		err := v.shardFailed(s, sl, i, 0, sl.dev.ReadAt(ctx, buf, v.g.LogOffset()))
		if isShardFault(err) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("segment %d slot %d: reading the write log: %w", s.id, i, err)
		}
		scanned[i] = true
		for _, r := range v.parseRing(s, i, buf) {
			if cur := out[r.stripe]; cur == nil || cur.seq.less(r.seq) {
				out[r.stripe] = r
			}
		}
	}
	return out, scanned, nil
}

// parseRing returns the live records of one slot's write-log area: the
// intact records of this segment for stripes the slot holds parity of, no
// older than the tail of the newest.
func (v *Volume) parseRing(s *segment, i int, buf []byte) []*logRecord {
	var all []*logRecord
	var newest *logRecord
	for at := int64(0); at < int64(len(buf)); {
		r, n, ok := decodeRecord(v.g, buf[at:])
		if !ok || r.seg != s.id || r.stripe < 0 || r.stripe >= v.g.StripesPerSegment() || v.g.ShardIn(r.stripe, i) < v.g.K {
			at += layout.ChecksumBlock
			continue
		}
		all = append(all, r)
		if newest == nil || newest.seq.less(r.seq) {
			newest = r
		}
		v.log.seen(r.seq)
		at += n * layout.ChecksumBlock
	}
	live := all[:0]
	for _, r := range all {
		if !r.seq.less(newest.tail) && s.usable(i, r.stripe) {
			live = append(live, r)
		}
	}
	return live
}

// settleStripe makes stripe t of a dirty segment consistent after a
// crash, with rec the newest live record of the stripe (nil: no write
// since its last flush). With every data shard usable the parity is
// recomputed from the data (healResync, which also settles torn
// checksums, and whole-stripe trims, which are not logged); with one
// missing, a stripe without a record is left as it is (consistent), and
// one with a record has its lost blocks solved from it (settleLost), the
// lost slot marked stale from t, and the parity recomputed from the data
// with the solved blocks. REQUIRES: s.io held shared.
func (v *Volume) settleStripe(ctx context.Context, s *segment, t int64, rec *logRecord, scanned []bool) error {
	return v.retryStripe(s, t, func(id layout.StripeID) error { return v.settleOnce(ctx, s, id, rec, scanned) })
}

func (v *Volume) settleOnce(ctx context.Context, s *segment, id layout.StripeID, rec *logRecord, scanned []bool) error {
	usable := v.usableShards(s, id)
	if count(usable) < v.g.K {
		// Nothing can be settled, so nothing is marked: a namespace this
		// owner cannot reach may be one the next owner reaches, and a
		// stale mark would keep it out of the stripe for good.
		return fmt.Errorf("segment %d stripe %d: settling needs %d shards: %w", s.id, id.Stripe, v.g.K, v.stripeError(s, id, usable))
	}
	known := false // the log area of a parity slot that serves the stripe was read
	for sh := v.g.K; sh < v.g.N(); sh++ {
		known = known || (usable[sh] && scanned[v.g.SlotOf(id.Stripe, sh)])
	}
	var lost []int
	for sh := range usable {
		switch {
		case usable[sh]:
		case sh < v.g.K:
			lost = append(lost, sh)
		case rec != nil: // its parity may be on either side of the write
			if err := v.missedSettle(ctx, s, v.g.SlotOf(id.Stripe, sh), id.Stripe); err != nil {
				return err
			}
		}
	}
	switch {
	case len(lost) == 0 && known:
		_, err := v.healStripeIn(ctx, s, id, healResync, &epochRows{rec: rec})
		return err
	case len(lost) == 0:
		return v.healStripe(ctx, s, id, healResync)
	case len(lost) == 1 && rec == nil && known:
		return nil // no write since the stripe's last flush
	case len(lost) > 1 && rec != nil:
		return v.poisonLost(ctx, s, id, usable, lost, rec)
	case len(lost) > 1 || rec == nil:
		return fmt.Errorf("segment %d stripe %d: settling needs all but one data shard and its write log: %w", s.id, id.Stripe, v.stripeError(s, id, usable))
	}
	return v.settleLost(ctx, s, id, usable, lost[0], rec)
}

// settleLost settles a stripe whose data shard x is missing: it solves
// x's blocks, records x's slot stale, heals torn blocks of the others and
// rewrites the parity from the data. A row where x cannot be solved is
// poisoned (reads of x there fail with class ErrCorrupt), its parity
// encoded again with x taken as zeros and marked so (reprotect), and is
// returned as an *UnsettledError.
func (v *Volume) settleLost(ctx context.Context, s *segment, id layout.StripeID, usable []bool, x int, rec *logRecord) error {
	img, err := v.readImage(ctx, s, id, usable)
	if err != nil {
		return err
	}
	defer img.bufs.release()
	defer v.csum.add(&img.found)
	rows := v.g.BlocksPerChunk()
	var bad []int64
	img.sums[x] = make([]uint32, rows)
	for r := int64(0); r < rows; r++ {
		out := img.bufs.shards[x][r*layout.ChecksumBlock : (r+1)*layout.ChecksumBlock]
		var ok bool
		idx, logged := rec.covers(r)
		switch {
		case logged:
			ok = v.solveLogged(img, usable, x, rec, idx, r, out)
		case v.solveClean(img, usable, x, r, out):
			ok = true
		case v.unsettledRow(id, r) && v.unsettled(id, x, r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock) == nil:
			// A re-protected row (no write reaches it): its parity is
			// marked, encoded with its unsettled block as zeros.
			_, ok = v.solveMarked(img, usable, x, r, out)
		}
		if !ok {
			bad = append(bad, r)
		}
		img.sums[x][r] = blockSum(out)
	}
	if err := v.missedSettle(ctx, s, v.g.SlotOf(id.Stripe, x), id.Stripe); err != nil {
		return err
	}
	with := slices.Clone(usable)
	with[x] = true
	for r := int64(0); r < rows; r++ {
		if !slices.Contains(bad, r) {
			v.healRow(img, with, r, healResync)
		}
	}
	v.reportHeal(s, id, img, healResync)
	if err := v.fixParity(img, usable, healResync); err != nil {
		return err
	}
	for _, r := range bad {
		for sh := v.g.K; sh < v.g.N(); sh++ {
			img.fixed[sh][r] = false
		}
		v.keepTorn(img, usable, x, r)
	}
	clear(img.fixed[x]) // its slot is stale: Repair rewrites it
	if err := v.writeFixes(ctx, s, id, img); err != nil {
		return err
	}
	if len(bad) == 0 {
		return nil
	}
	v.poison(id, x, bad)
	if err := v.reprotect(ctx, s, id, usable, img, x, bad); err != nil {
		return err
	}
	return &UnsettledError{Segment: s.id, Stripe: id.Stripe, Shard: x, NS: s.slots[v.g.SlotOf(id.Stripe, x)].ref.NS, Rows: bad}
}

// missedSettle records, before the settling of stripe t is written, that
// each copy of slot i of s misses it. A copy that is current at t and only
// unreachable from here (its namespace is down to this owner, which may be
// cut off from it while others reach it) misses stripe t alone: t becomes
// a hole of the copy, recorded by stripe, and the rest of the slot stays
// good for the next owner (Repair rebuilds the hole). Marking the whole
// slot stale, as a write that goes around a down namespace does, would
// take every stripe of it out: an owner cut off from two namespaces of a
// 4+2 segment whose third is lost then leaves each segment with three
// stale slots. Other copies are marked as missed does.
func (v *Volume) missedSettle(ctx context.Context, s *segment, i int, t int64) error {
	for _, c := range []*slot{s.slots[i], s.slots[i].prev.Load()} {
		if c == nil {
			continue
		}
		away := c.ns.down.Load() && c.valid.Load() > t && !c.logged.Load()
		if err := v.missedCopy(ctx, s, i, t, c, away || c.hasHole(t)); err != nil {
			return err
		}
	}
	return nil
}

// poisonLost defers a stripe with a record whose data shards lost are
// more than one: the survivors of the rows written in the record's epoch
// may be on different versions, each matching its checksum (a checksum
// page can land before its data), and the record's partial parity solves
// one lost shard only. A row whose lost blocks, rebuilt from the
// survivors as they are, all have checksums the record allows them is
// consistent (the record's epoch may be long flushed); in the others,
// reads of the lost shards fail with class ErrCorrupt, also after a
// reopen (their parity keeps checksums it does not match), until a write
// of the whole stripe. The stripe is returned as a *StripeError: its
// segment stays dirty.
func (v *Volume) poisonLost(ctx context.Context, s *segment, id layout.StripeID, usable []bool, lost []int, rec *logRecord) error {
	deferred := fmt.Errorf("segment %d stripe %d: %d data shards lost in a stripe written at the crash: %w", s.id, id.Stripe, len(lost), v.stripeError(s, id, usable))
	if count(usable) < v.g.K {
		return deferred // nothing reads them
	}
	img, err := v.readImage(ctx, s, id, usable)
	if err != nil {
		return err
	}
	defer img.bufs.release()
	var rows []int64
	for r := int64(0); r < v.g.BlocksPerChunk(); r++ {
		idx, logged := rec.covers(r)
		switch {
		case !logged:
		case !v.solveLostRow(img, usable, lost, rec, idx, r):
			rows = append(rows, r)
			v.logStats.unsettled.Add(int64(len(lost)))
		default:
			if err := v.settleTornSums(ctx, s, id, usable, img, rec, idx, r); err != nil {
				return err
			}
		}
	}
	if len(rows) == 0 {
		return deferred
	}
	for _, x := range lost {
		v.poison(id, x, rows)
	}
	if err := v.poisonParity(ctx, s, id, usable, img, rows); err != nil {
		return err
	}
	return deferred
}

// settleTornSums stores, for the blocks of consistent row r (the record's
// row idx) on usable shards that do not match their checksums, the
// checksums of what they hold: the checksum pages of the write cut off by
// the crash landed without its data (or the other way round), and the row
// as it is holds one version of it, the lost blocks rebuilt from it having
// checksums the record allows. A data block is taken only when it holds a
// value the record allows it too; parity, encoded from those, with them.
// Left as they were, the row had K-M good blocks: once the lost shards
// were back (stale, to be rebuilt), every rebuild of them failed on a
// checksum mismatch, for good, and the segment stayed dirty.
func (v *Volume) settleTornSums(ctx context.Context, s *segment, id layout.StripeID, usable []bool, img *stripeImage, rec *logRecord, idx int, r int64) error {
	lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
	var take []int
	for sh := range v.g.N() {
		if !usable[sh] {
			continue
		}
		sum := blockSum(img.bufs.shards[sh][lo:hi])
		if sum == img.sums[sh][r] {
			continue
		}
		if sh < v.g.K {
			if allowed := rec.sums[idx*v.g.K+sh]; sum != allowed[0] && sum != allowed[1] {
				return nil // not a version the record knows: left for the heal and the proof
			}
		}
		take = append(take, sh)
	}
	for _, sh := range take {
		sum := blockSum(img.bufs.shards[sh][lo:hi])
		for _, sl := range s.writeSlots(v.g.SlotOf(id.Stripe, sh), id.Stripe) {
			if err := v.setSum(ctx, sl, id.Stripe, lo, sum); err != nil {
				return err
			}
		}
	}
	return nil
}

// solveLostRow reports whether the lost data blocks of row r (the
// record's row idx), rebuilt from the usable shards as they are, each have
// a checksum the record allows there.
func (v *Volume) solveLostRow(img *stripeImage, usable []bool, lost []int, rec *logRecord, idx int, r int64) bool {
	lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
	shards := make([][]byte, v.g.N())
	want := make([]bool, v.g.N())
	for sh := range shards {
		if usable[sh] {
			shards[sh] = img.bufs.shards[sh][lo:hi]
		}
	}
	for _, x := range lost {
		want[x] = true
	}
	if err := v.codec.ReconstructRange(shards, want); err != nil {
		return false
	}
	for _, x := range lost {
		sum, allowed := blockSum(shards[x]), rec.sums[idx*v.g.K+x]
		if sum != allowed[0] && sum != allowed[1] {
			return false
		}
	}
	return true
}

// keepTorn marks for rewriting (with their checksums) the data blocks of
// unsettled row r that do not match their stored checksums: as in
// healResync, in a stripe written at the crash such a block is a torn
// write (the block or its checksum page landed without the other), one of
// the values it held, and reads as it is. Never a blank or another slot's
// block (misplaced), nor a listed unsettled one: no write wrote those
// there, and kept, a blank would read as zeros once nothing listed it.
func (v *Volume) keepTorn(img *stripeImage, usable []bool, x int, r int64) {
	lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
	for sh := 0; sh < v.g.K; sh++ {
		if sh == x || !usable[sh] || v.misplaced(img, sh, r) || v.unsettled(img.id, sh, lo, hi) != nil {
			continue
		}
		if blockSum(img.bufs.shards[sh][lo:hi]) != img.sums[sh][r] {
			img.fixed[sh][r] = true
			img.torn[sh][r] = true
			img.found.Torn++
		}
	}
}

// poisonParity stores, for the parity blocks of the unsettled rows, a
// checksum their contents do not match: a reconstruction of the lost
// shard there (a read, a rebuild) then finds fewer than K good blocks and
// fails with class ErrCorrupt, also after a reopen, instead of rebuilding
// garbage; a write of the whole row stores a good one again.
func (v *Volume) poisonParity(ctx context.Context, s *segment, id layout.StripeID, usable []bool, img *stripeImage, bad []int64) error {
	for sh := v.g.K; sh < v.g.N(); sh++ {
		if !usable[sh] {
			continue
		}
		for _, sl := range s.writeSlots(v.g.SlotOf(id.Stripe, sh), id.Stripe) {
			for _, r := range bad {
				lo := r * layout.ChecksumBlock
				sum := ^blockSum(img.bufs.shards[sh][lo : lo+layout.ChecksumBlock])
				if err := v.setSum(ctx, sl, id.Stripe, lo, sum); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// setSum stores sum as the checksum of the block at chunk offset off of
// stripe t of slot copy sl, durable at the next Flush.
func (v *Volume) setSum(ctx context.Context, sl *slot, t, off int64, sum uint32) error {
	p, at, err := v.sumPageOf(ctx, sl, t, off)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.set(at, sum)
	p.gen++
	p.mu.Unlock()
	v.sumsPending(sl, p)
	return nil
}

// solveClean rebuilds row r of x from K usable shards whose blocks match
// their checksums: a row without a write in the record's epoch is
// consistent.
func (v *Volume) solveClean(img *stripeImage, usable []bool, x int, r int64, out []byte) bool {
	shards := make([][]byte, v.g.N())
	lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
	for sh := range shards {
		if usable[sh] && blockSum(img.bufs.shards[sh][lo:hi]) == img.sums[sh][r] {
			shards[sh] = img.bufs.shards[sh][lo:hi]
		}
	}
	return v.solveRow(shards, x, out, func([]byte) bool { return true })
}

// solveLogged solves row r of x (the record's row idx) and accepts a
// result only when its checksum is one the record allows x there (its
// value at the epoch's start or its latest). It tries the partial parity
// with the data not written in the epoch, then each usable parity with
// the other data as they are, then (M >= 2) each pair of parities with
// one written data block taken as unknown too. A row whose surviving
// blocks all read zeros gets no exception: they may be on different
// versions (a new parity of zeros beside old data of zeros), and a
// zeroing of the stripe since the record has a record of its own
// (logZero).
func (v *Volume) solveLogged(img *stripeImage, usable []bool, x int, rec *logRecord, idx int, r int64, out []byte) bool {
	allowed := rec.sums[idx*v.g.K+x]
	accept := func(b []byte) bool {
		s := blockSum(b)
		return s == allowed[0] || s == allowed[1]
	}
	if v.solvePartial(img, x, rec, idx, r, out, accept) {
		v.logStats.partial.Add(1)
		return true
	}
	if v.solveParity(img, usable, x, rec.touched[idx]&^noPPBit, r, out, accept) {
		v.logStats.parity.Add(1)
		return true
	}
	v.logStats.unsettled.Add(1)
	return false
}

// solvePartial solves row r of x, not written in the record's epoch, from
// the record's partial parity and the data shards not written either.
func (v *Volume) solvePartial(img *stripeImage, x int, rec *logRecord, idx int, r int64, out []byte, accept func([]byte) bool) bool {
	bits := rec.touched[idx] &^ noPPBit
	if bits&(1<<x) != 0 || rec.pp[idx] == nil {
		return false
	}
	g := v.g
	lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
	shards := make([][]byte, g.N())
	zero := make([]byte, layout.ChecksumBlock)
	for sh := 0; sh < g.K; sh++ {
		switch {
		case sh == x:
		case bits&(1<<sh) != 0:
			shards[sh] = zero
		default:
			shards[sh] = img.bufs.shards[sh][lo:hi]
		}
	}
	shards[g.K] = rec.pp[idx]
	return v.solveRow(shards, x, out, accept)
}

// solveParity solves row r of x from each usable parity with the other
// data as they are, then (M >= 2) from each pair of parities with one
// data block written in the epoch (bits) taken as unknown too.
func (v *Volume) solveParity(img *stripeImage, usable []bool, x int, bits uint32, r int64, out []byte, accept func([]byte) bool) bool {
	g := v.g
	lo, hi := r*layout.ChecksumBlock, (r+1)*layout.ChecksumBlock
	var par, written []int
	for sh := g.K; sh < g.N(); sh++ {
		if usable[sh] {
			par = append(par, sh)
		}
	}
	for sh := 0; sh < g.K; sh++ {
		if sh != x && bits&(1<<sh) != 0 {
			written = append(written, sh)
		}
	}
	try := func(with []int, without int) bool {
		shards := make([][]byte, g.N())
		for sh := 0; sh < g.K; sh++ {
			if sh != x && sh != without {
				shards[sh] = img.bufs.shards[sh][lo:hi]
			}
		}
		for _, sh := range with {
			shards[sh] = img.bufs.shards[sh][lo:hi]
		}
		return v.solveRow(shards, x, out, accept)
	}
	for _, p := range par {
		if try([]int{p}, -1) {
			return true
		}
	}
	for a := range par {
		for b := a + 1; b < len(par); b++ {
			for _, y := range written {
				if try([]int{par[a], par[b]}, y) {
					return true
				}
			}
		}
	}
	return false
}

// solveRow reconstructs shard x from the present rows of shards into out
// and reports whether that worked and accept took the result.
func (v *Volume) solveRow(shards [][]byte, x int, out []byte, accept func([]byte) bool) bool {
	want := make([]bool, v.g.N())
	want[x] = true
	cand := make([]byte, 0, layout.ChecksumBlock)
	shards[x] = cand
	if err := v.codec.ReconstructRange(shards, want); err != nil || !accept(shards[x]) {
		return false
	}
	copy(out, shards[x])
	return true
}

// UnsettledError reports rows of a stripe whose missing data shard a
// recovery could not solve to any value it held: a crash in the middle of
// a write left the other shards on different versions, and the write log
// does not pin down which. Reads of those blocks fail with its class,
// blockdev.ErrCorrupt (after a reopen too: the parity blocks of those rows
// keep checksums they do not match), until a write of the whole stripe.
// Writes of part of the stripe that touch those rows fail with the same
// class meanwhile (writes of its other rows go on).
type UnsettledError struct {
	Segment, Stripe int64
	Shard           int
	NS              string
	Rows            []int64 // 4 KiB blocks of the chunk
}

func (e *UnsettledError) Error() string {
	return fmt.Sprintf("segment %d stripe %d: %d blocks of data shard %d (namespace %s) lost in a crash mid-write and the loss of the namespace",
		e.Segment, e.Stripe, len(e.Rows), e.Shard, e.NS)
}

func (e *UnsettledError) Unwrap() error { return blockdev.ErrCorrupt }

// unsettled fails with class ErrCorrupt when chunk range [lo, hi) of
// shard of stripe id (any shard, when shard < 0) holds an unsettled block.
func (v *Volume) unsettled(id layout.StripeID, shard int, lo, hi int64) error {
	p := &v.poisoned
	if !p.any.Load() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, rows := range p.rows {
		if k.id != id || (shard >= 0 && k.shard != shard) {
			continue
		}
		for _, r := range rows {
			if r*layout.ChecksumBlock < hi && (r+1)*layout.ChecksumBlock > lo {
				return fmt.Errorf("segment %d stripe %d shard %d: block %d lost in a crash and a namespace loss: %w",
					id.Segment, id.Stripe, k.shard, r, blockdev.ErrCorrupt)
			}
		}
	}
	return nil
}

// LogStats counts what recoveries of a volume with a write log did with
// blocks of a lost data shard in rows written at the crash.
type LogStats struct {
	Partial   int64 // solved from the record's partial parity (not written in the epoch)
	Parity    int64 // solved from a version-consistent set of the other shards
	Unsettled int64 // neither: reads of them fail with class ErrCorrupt
}

type logCounters struct{ partial, parity, unsettled atomic.Int64 }

// LogStats returns the write-log recovery counters.
func (v *Volume) LogStats() LogStats {
	c := &v.logStats
	return LogStats{Partial: c.partial.Load(), Parity: c.parity.Load(), Unsettled: c.unsettled.Load()}
}
