package volume

// The write log (format 3, layout.Geometry.Log) closes the write hole: an
// owner crash in the middle of a stripe write leaves each block of each
// shard holding its old or its new value, so data and parity disagree; if
// a shard of that stripe is then lost before the parity is resynced,
// reconstructing it from the others gives bytes that were never written,
// also in the chunks the write did not touch (acknowledged long before).
//
// Like md's partial parity log (raid5-ppl), every stripe write first makes
// a record durable (FUA) on the log area of the stripe's parity slots (M
// copies on M namespaces other than the data it protects), then writes
// data and parity. A record describes the stripe's epoch: everything
// written to it since its writes were last made durable by a Flush
// (cumulative, so several unflushed writes to one stripe are covered by
// the newest record alone). Per 4 KiB row written in the epoch it holds:
//
//   - the partial parity of the data chunks not written in the epoch (the
//     first parity row's share of them, as RS encoding is linear), which
//     solves a lost untouched chunk without trusting parity or the written
//     chunks;
//   - the crc32c of every data block at the epoch's start and of its latest
//     value, which tells a reconstructed block that is one of the values
//     the block held from garbage.
//
// Recovery (ppl_recover.go) solves a lost data block from the partial
// parity, or from any version-consistent set of the surviving shards, and
// accepts a result only when its checksum is one the record allows. A row
// where nothing consistent is found is reported Corrupt, never guessed.
//
// The log area of each slot copy is a ring (logRing). Records are freed
// when a Flush that began after their write ended has completed (the data
// they protect is durable); a write that finds the ring full of live
// records flushes the volume first. Every record carries the sequence of
// the oldest record still live in its ring (its tail), so recovery ignores
// records that were already dead, and sequences start with the owner epoch
// (Options.LogEpoch), so a new owner's records supersede an old one's.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/ec"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// errLogFull: the ring has no dead record to overwrite; flush and retry.
var errLogFull = errors.New("write log full")

// ringBusy is errLogFull where the oldest record of the ring is of a
// write in flight: a flush frees it only once that write ended
// (awaitEnd).
type ringBusy struct{ mark *writeMark }

func (*ringBusy) Error() string        { return "write log full of records of writes in flight" }
func (*ringBusy) Is(target error) bool { return target == errLogFull }

// writeMark is the number of flushes begun when a logged write ended,
// math.MaxInt64 while it runs; its records' ring entries share it.
type writeMark struct {
	atomic.Int64
	waited atomic.Bool   // a writer waits for the end (wait)
	mu     sync.Mutex    // guards ended
	ended  chan struct{} // closed at the end once wait made it
}

func newWriteMark() *writeMark {
	m := &writeMark{}
	m.Store(math.MaxInt64)
	return m
}

// end records that the write ended when flushes flushes had begun, and
// wakes the writers waiting for it.
func (m *writeMark) end(flushes int64) {
	m.Store(flushes)
	if !m.waited.Load() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ended != nil {
		close(m.ended)
		m.ended = nil
	}
}

// wait returns a channel closed when the write ends, or nil when it has.
// It sets waited before it reads the mark, end sets the mark before it
// reads waited: one of the two sees the other.
func (m *writeMark) wait() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ended == nil {
		m.ended = make(chan struct{})
	}
	m.waited.Store(true)
	if m.Load() != math.MaxInt64 {
		return nil
	}
	return m.ended
}

// stripeEpoch is the write log's view of one stripe since its writes were
// last made durable. REQUIRES: the stripe's lock held, except mark (logMu).
type stripeEpoch struct {
	touched []uint32    // per row: data shards written in the epoch (noPPBit: no partial parity)
	sums    [][2]uint32 // per row*K + shard: checksum at the epoch's start, latest
	pp      [][]byte    // per row: partial parity block, valid where the bitmap is partial; nil until needed
	r0, r1  int64       // rows covered so far (r1 == 0: none)
	mark    int64       // flushes begun when its last write ended; math.MaxInt64 while one runs (logMu)
}

// logState is the volume's write-log bookkeeping.
type logState struct {
	mu     sync.Mutex
	epochs map[layout.StripeID]*stripeEpoch
	spare  []*stripeEpoch // ended epochs to reuse (their blocks too); REQUIRES: mu held

	seqEpoch atomic.Uint64 // Options.LogEpoch, or a later epoch found on disk
	seq      atomic.Uint64 // last record number used in this epoch

	flushBegun atomic.Int64 // Flush calls started
	flushDone  atomic.Int64 // highest Flush call completed successfully

	zeros  []byte    // a chunk of zeros, never written: the partial parity's stand-in for written blocks
	blocks int64     // blocks of each ring (layout.Geometry.LogArea)
	offset int64     // slot offset of the rings (layout.Geometry.LogOffset)
	row0   *ec.Codec // computes the first parity row alone (firstRowCodec)
	args   sync.Pool // *[][]byte: codecArgs

	flushMu sync.Mutex // one logFlush at a time
}

// init sets up the bookkeeping of a volume of geometry g with the write
// log, whose owner epoch is epoch and whose codec is codec (built with
// opts).
func (l *logState) init(g layout.Geometry, epoch int64, codec *ec.Codec, opts []ec.Option) error {
	l.seqEpoch.Store(uint64(epoch))
	if !g.Log {
		return nil
	}
	l.zeros = make([]byte, g.Chunk)
	l.blocks, l.offset = g.LogArea()/layout.ChecksumBlock, g.LogOffset()
	var err error
	l.row0, err = firstRowCodec(codec, opts)
	return err
}

// firstRowCodec returns a codec of K data shards and one parity shard
// that computes the first parity row of codec, checked on a sample: the
// partial parity is that row's share of some data shards, and computing
// the other M-1 rows beside it only to throw them away doubled its cost
// with M = 2. In the systematic matrix that ec's wire format names, a
// parity row is its Vandermonde row times the inverse of the top K rows,
// so row K is the same for every M. Without parity (M = 0, no ring to
// log to) it returns nil: no write computes a partial parity.
func firstRowCodec(codec *ec.Codec, opts []ec.Option) (*ec.Codec, error) {
	switch codec.M() {
	case 0:
		return nil, nil
	case 1:
		return codec, nil
	}
	row0, err := ec.New(codec.K(), 1, opts...)
	if err != nil {
		return nil, err
	}
	const n = 64
	full, one := make([][]byte, codec.K()+codec.M()), make([][]byte, codec.K()+1)
	for i := range full {
		full[i] = make([]byte, n)
		if i < codec.K() {
			for b := range full[i] {
				full[i][b] = byte(31*i + 7*b + 1)
			}
			one[i] = full[i]
		}
	}
	one[codec.K()] = make([]byte, n)
	if err := codec.Encode(full); err != nil {
		return nil, err
	}
	if err := row0.Encode(one); err != nil {
		return nil, err
	}
	if !slices.Equal(one[codec.K()], full[codec.K()]) {
		return nil, fmt.Errorf("write log: a %d+1 codec does not compute the first parity row of %v: %w", codec.K(), codec, ec.ErrInvalidParams)
	}
	return row0, nil
}

// dead reports whether work that ended when mark flushes had begun is
// durable.
func (l *logState) dead(mark int64) bool { return mark != math.MaxInt64 && l.flushDone.Load() > mark }

// flushStarted is called at the start of a Flush; flushEnded with its
// number when it succeeded.
func (l *logState) flushStarted() int64 { return l.flushBegun.Add(1) }

func (l *logState) flushEnded(id int64) {
	for {
		cur := l.flushDone.Load()
		if cur >= id || l.flushDone.CompareAndSwap(cur, id) {
			break
		}
	}
	l.mu.Lock()
	for k, e := range l.epochs {
		if l.dead(e.mark) {
			delete(l.epochs, k)
			if len(l.spare) < maxSpareEpochs {
				l.spare = append(l.spare, e)
			}
		}
	}
	l.mu.Unlock()
}

// begin returns the stripe's epoch (a new one when the last ended) and
// marks a write running.
func (l *logState) begin(g layout.Geometry, id layout.StripeID) *stripeEpoch {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.epochs == nil {
		l.epochs = map[layout.StripeID]*stripeEpoch{}
	}
	e := l.epochs[id]
	if e == nil || l.dead(e.mark) {
		e = l.fresh(g)
		l.epochs[id] = e
	}
	e.mark = math.MaxInt64
	return e
}

// maxSpareEpochs bounds the ended epochs kept for reuse.
const maxSpareEpochs = 1024

// fresh returns an empty epoch, reusing an ended one when there is one.
// REQUIRES: mu held.
func (l *logState) fresh(g layout.Geometry) *stripeEpoch {
	if n := len(l.spare); n > 0 {
		e := l.spare[n-1]
		l.spare = l.spare[:n-1]
		clear(e.touched) // e.pp keeps its blocks: only partial rows' are read
		clear(e.sums)    // a record carries those of untouched rows too: no other stripe's
		e.r0, e.r1 = 0, 0
		return e
	}
	rows := g.BlocksPerChunk()
	return &stripeEpoch{touched: make([]uint32, rows), sums: make([][2]uint32, rows*int64(g.K)), pp: make([][]byte, rows)}
}

// end records that the write begun on e ended.
func (l *logState) end(e *stripeEpoch) {
	m := l.flushBegun.Load()
	l.mu.Lock()
	e.mark = m
	l.mu.Unlock()
}

// drop forgets stripe id's epoch: its next write starts a new one.
func (l *logState) drop(id layout.StripeID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.epochs, id)
}

// next returns a new record sequence.
func (l *logState) next() logSeq { return logSeq{l.seqEpoch.Load(), l.seq.Add(1)} }

// seen makes the sequences given from now on later than seq, found on
// disk by a recovery (before any write).
func (l *logState) seen(seq logSeq) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.seqEpoch.Load(); seq.epoch > e {
		l.seqEpoch.Store(seq.epoch)
		l.seq.Store(seq.n)
	} else if seq.epoch == e && seq.n > l.seq.Load() {
		l.seq.Store(seq.n)
	}
}

// logRing is the write-log area of one slot copy, used as a ring of
// records in sequence order.
type logRing struct {
	mu      sync.Mutex
	head    int64 // next block to write
	entries []ringEntry
}

type ringEntry struct {
	pos, n int64
	seq    logSeq
	mark   *writeMark // of the write it protects
}

// reserve finds n blocks for a record at the head of a ring of size
// blocks, freeing the oldest records (which must be dead), and returns
// the position, the record's sequence and tail.
func (r *logRing) reserve(l *logState, n, size int64, mark *writeMark) (int64, logSeq, logSeq, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.head+n > size {
		if err := r.free(l, r.head, size); err != nil {
			return 0, logSeq{}, logSeq{}, err
		}
		r.head = 0
	}
	if err := r.free(l, r.head, r.head+n); err != nil {
		return 0, logSeq{}, logSeq{}, err
	}
	seq := l.next()
	tail := seq
	if len(r.entries) > 0 {
		tail = r.entries[0].seq
	}
	pos := r.head
	r.entries = append(r.entries, ringEntry{pos: pos, n: n, seq: seq, mark: mark})
	r.head += n
	return pos, seq, tail, nil
}

// free drops the oldest entries that overlap blocks [lo, hi).
func (r *logRing) free(l *logState, lo, hi int64) error {
	for len(r.entries) > 0 {
		e := r.entries[0]
		if e.pos >= hi || e.pos+e.n <= lo {
			return nil
		}
		if m := e.mark.Load(); m == math.MaxInt64 {
			return &ringBusy{mark: e.mark}
		} else if !l.dead(m) {
			return errLogFull
		}
		r.entries = r.entries[1:]
	}
	return nil
}

// logWrite makes the record of a stripe write durable on every copy of
// the stripe's usable parity slots, before the write touches data or
// parity. It returns the mark to set when the write ends (nil when the
// plan needs no record). REQUIRES: stripe lock held.
func (v *Volume) logWrite(ctx context.Context, s *segment, sio layout.StripeIO, p []byte, plan writePlan, b *stripeBufs) (*stripeEpoch, *writeMark, error) {
	if !v.g.Log || plan.Mode == modeDataOnly {
		return nil, nil, nil
	}
	e := v.log.begin(v.g, sio.ID)
	rec, err := v.logUpdate(ctx, s, sio, p, plan, b, e)
	if err != nil {
		v.log.end(e)
		return nil, nil, err
	}
	return v.writeRecords(ctx, s, plan, e, rec)
}

// writeRecords writes rec, the record of epoch e as of a write, to every
// copy of the parity slots plan writes. It returns the mark to set when
// the write ends; on an error it ends the write itself.
func (v *Volume) writeRecords(ctx context.Context, s *segment, plan writePlan, e *stripeEpoch, rec logRecord) (*stripeEpoch, *writeMark, error) {
	mark := newWriteMark()
	copies := v.recordCopies(s, rec.stripe, plan, rec.size(v.g)*layout.ChecksumBlock)
	defer v.putRecordCopies(copies)
	for j, c := range copies {
		if j == 0 {
			rec.encodeBody(v.g, c.buf)
		} else {
			copy(c.buf, copies[0].buf) // each copy in flight has its own header
		}
	}
	err := v.each(len(copies), func(j int) error {
		c := &copies[j]
		return v.writeRecord(ctx, s, c.slot, c.sl, rec.stripe, c.buf, mark)
	})
	if err != nil {
		v.log.end(e)
		mark.end(v.log.flushBegun.Load())
		return nil, nil, err
	}
	return e, mark, nil
}

// recordCopy is one copy of a write's record: the parity slot and slot
// copy it goes to, and its buffer.
type recordCopy struct {
	slot int
	sl   *slot
	buf  []byte
	bp   *[]byte // buf's pool buffer, or nil
}

// recordCopies returns a copy with a buffer of n bytes for every copy of
// the parity slots plan writes for stripe t. Release them with
// putRecordCopies.
func (v *Volume) recordCopies(s *segment, t int64, plan writePlan, n int64) []recordCopy {
	copies := make([]recordCopy, 0, 2*v.g.M)
	var own [2]*slot
	for sh := v.g.K; sh < v.g.N(); sh++ {
		if contains(plan.Writes, sh) {
			i := v.g.SlotOf(t, sh)
			for _, sl := range s.appendWriteSlots(own[:0], i, t) {
				bp, buf := v.recordBuf(n)
				copies = append(copies, recordCopy{slot: i, sl: sl, buf: buf, bp: bp})
			}
		}
	}
	return copies
}

func (v *Volume) putRecordCopies(copies []recordCopy) {
	for _, c := range copies {
		if c.bp != nil {
			v.putBuf(c.bp)
		}
	}
}

// recordBuf returns a buffer of n bytes for a record: from the chunk pool
// when it fits (a record of a write within one chunk's rows and few
// partial rows; bp is its pool buffer), else allocated (bp nil).
func (v *Volume) recordBuf(n int64) (bp *[]byte, buf []byte) {
	if n <= v.g.Chunk {
		return v.getBuf(n)
	}
	return nil, make([]byte, n)
}

// logDone ends a logged write.
func (v *Volume) logDone(e *stripeEpoch, mark *writeMark) {
	if e == nil {
		return
	}
	v.log.end(e)
	mark.end(v.log.flushBegun.Load())
}

// logFlush flushes the volume to free write-log space, unless a flush
// that began after the call did so meanwhile: writers that find rings
// full at once share one flush instead of running one each.
func (v *Volume) logFlush(ctx context.Context) error {
	seen := v.log.flushBegun.Load()
	v.log.flushMu.Lock()
	defer v.log.flushMu.Unlock()
	if v.log.flushDone.Load() > seen {
		return nil
	}
	return v.Flush(ctx)
}

// maxEndWait bounds a wait for a write in flight to end (awaitEnd): a
// wakeup missed for any reason costs this, not a hang.
const maxEndWait = 50 * time.Millisecond

// awaitEnd waits, when err says a ring is full up to a record of a write
// in flight, for that write to end, and returns ctx's error when it is
// done first.
func awaitEnd(ctx context.Context, err error) error {
	var busy *ringBusy
	if !errors.As(err, &busy) {
		return ctx.Err()
	}
	ended := busy.mark.wait()
	if ended == nil {
		return ctx.Err()
	}
	t := time.NewTimer(maxEndWait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-ended:
	case <-t.C:
	}
	return nil
}

// writeRecord writes the encoded record buf, stamped with its sequence in
// the ring of copy sl of slot i, to sl with FUA.
func (v *Volume) writeRecord(ctx context.Context, s *segment, i int, sl *slot, t int64, buf []byte, mark *writeMark) error {
	n := int64(len(buf)) / layout.ChecksumBlock
	pos, seq, tail, err := sl.ring.reserve(&v.log, n, v.log.blocks, mark)
	if err != nil {
		return err
	}
	stamp(buf, seq, tail)
	err = blockdev.WriteFUA(ctx, sl.dev, buf, v.log.offset+pos*layout.ChecksumBlock)
	return v.shardFailed(s, sl, i, t, err)
}

// logUpdate folds the write of sio into the stripe's epoch e and returns
// the record of the epoch as of this write. REQUIRES: stripe lock held.
func (v *Volume) logUpdate(ctx context.Context, s *segment, sio layout.StripeIO, p []byte, plan writePlan, b *stripeBufs, e *stripeEpoch) (logRecord, error) {
	g := v.g
	lo, hi := plan.Lo/layout.ChecksumBlock, plan.Hi/layout.ChecksumBlock
	var small [32]uint32 // a chunk of 128 KiB has 32 rows
	wt := writtenRows(small[:0], sio, lo, hi)
	if err := v.epochSums(ctx, s, sio.ID, b, e, lo, hi); err != nil {
		return logRecord{}, err
	}
	if err := v.partialParity(plan, b, e, wt, lo, hi); err != nil {
		return logRecord{}, err
	}
	for _, pc := range sio.Pieces {
		r0 := pc.Off / layout.ChecksumBlock
		for j, sum := range b.dataSums(pc.Shard, p[pc.Buf:pc.Buf+pc.Len]) {
			e.sums[(r0+int64(j))*int64(g.K)+int64(pc.Shard)][1] = sum
		}
	}
	for r := lo; r < hi; r++ {
		e.touched[r] |= wt[r-lo]
	}
	if e.r1 == 0 {
		e.r0, e.r1 = lo, hi
	}
	e.r0, e.r1 = min(e.r0, lo), max(e.r1, hi)
	return e.record(g, sio.ID), nil
}

// writtenRows returns, per row of [lo, hi), the data shards sio writes,
// in buf's array when it has room.
func writtenRows(buf []uint32, sio layout.StripeIO, lo, hi int64) []uint32 {
	wt := slices.Grow(buf[:0], int(hi-lo))[:hi-lo]
	clear(wt)
	for _, pc := range sio.Pieces {
		for r := pc.Off / layout.ChecksumBlock; r < (pc.Off+pc.Len)/layout.ChecksumBlock; r++ {
			wt[r-lo] |= 1 << pc.Shard
		}
	}
	return wt
}

// epochSums fills the epoch-start checksums of the rows of [lo, hi) that
// enter the epoch now: from the checksum cache for usable shards, from
// the data as the write planned it (rebuild mode) for missing ones.
func (v *Volume) epochSums(ctx context.Context, s *segment, id layout.StripeID, b *stripeBufs, e *stripeEpoch, lo, hi int64) error {
	k := int64(v.g.K)
	fresh := false
	for r := lo; r < hi; r++ {
		fresh = fresh || e.touched[r]&^noPPBit == 0
	}
	if !fresh {
		return nil
	}
	got := make([]uint32, hi-lo)
	for sh := 0; sh < v.g.K; sh++ {
		sl := s.readSlot(v.g.SlotOf(id.Stripe, sh), id.Stripe)
		if sl != nil {
			if err := v.storedSums(ctx, sl, id.Stripe, lo*layout.ChecksumBlock, got); err != nil {
				return v.shardFailed(s, sl, v.g.SlotOf(id.Stripe, sh), id.Stripe, err)
			}
		} else {
			buf := b.shards[sh] // rebuild mode: the span, current values
			if len(buf) == 0 {
				// It went missing after the plan: plan again without it.
				return &shardFault{err: fmt.Errorf("segment %d stripe %d shard %d: %w", id.Segment, id.Stripe, sh, errNoCopy)}
			}
			for r := lo; r < hi; r++ {
				at := (r - lo) * layout.ChecksumBlock
				got[r-lo] = blockSum(buf[at : at+layout.ChecksumBlock])
			}
		}
		for r := lo; r < hi; r++ {
			if e.touched[r]&^noPPBit == 0 {
				e.sums[r*k+int64(sh)] = [2]uint32{got[r-lo], got[r-lo]}
			}
		}
	}
	return nil
}

// record renders the epoch as a record (sequence and tail unset).
func (e *stripeEpoch) record(g layout.Geometry, id layout.StripeID) logRecord {
	k := int64(g.K)
	return logRecord{seg: id.Segment, stripe: id.Stripe, r0: e.r0,
		touched: e.touched[e.r0:e.r1], sums: e.sums[e.r0*k : e.r1*k], pp: e.pp[e.r0:e.r1]}
}

// partialParity updates the epoch's partial parity over rows [lo, hi):
// the first parity row's share of the data shards not written in the
// epoch. It computes it over the rows from the first to the last that
// need one (a row every data shard of which is written needs none). A
// delta write derives it from the old parity and the old data it read;
// the other modes encode it from the data they hold. A write with one
// such row new to the epoch computes it in the row's block itself (which
// holds nothing valid yet, so a failure loses nothing), any other in a
// span it then copies to the rows that need it.
func (v *Volume) partialParity(plan writePlan, b *stripeBufs, e *stripeEpoch, wt []uint32, lo, hi int64) error {
	rows := ppRows{lo: hi}
	for r := lo; r < hi; r++ {
		if partialRow(e.touched[r]|wt[r-lo], v.g.K) {
			rows.lo, rows.hi = min(rows.lo, r), r+1
		}
	}
	if rows.hi == 0 {
		return nil
	}
	rows.wt, rows.at = wt[rows.lo-lo:rows.hi-lo], (rows.lo-lo)*layout.ChecksumBlock
	inPlace := rows.hi-rows.lo == 1 && e.touched[rows.lo]&^noPPBit == 0
	var span []byte
	if inPlace {
		span = e.ppBlock(rows.lo)
	} else {
		span = b.scratch((rows.hi - rows.lo) * layout.ChecksumBlock)
	}
	var err error
	if plan.Mode == modeDelta {
		err = v.ppDelta(b, e, rows, span)
	} else {
		err = v.ppEncode(b, e, rows, span)
	}
	if err != nil || inPlace {
		return err
	}
	for r := rows.lo; r < rows.hi; r++ {
		if partialRow(e.touched[r]|rows.wt[r-rows.lo], v.g.K) {
			copy(e.ppBlock(r), span[(r-rows.lo)*layout.ChecksumBlock:])
		}
	}
	return nil
}

// ppRows are the rows a partial parity is computed over.
type ppRows struct {
	lo, hi int64
	wt     []uint32 // per row: the data shards the write writes
	at     int64    // offset of row lo in the write's span buffers (stripeBufs)
}

// ppBlock returns row r's partial-parity block, allocated on first use.
func (e *stripeEpoch) ppBlock(r int64) []byte {
	if e.pp[r] == nil {
		e.pp[r] = make([]byte, layout.ChecksumBlock)
	}
	return e.pp[r]
}

// ppDelta: partial parity = (the epoch's, or for rows new to the epoch the
// old parity) minus the share of the data shards this write is the first
// in the epoch to change, taken from their old values.
func (v *Volume) ppDelta(b *stripeBufs, e *stripeEpoch, rows ppRows, span []byte) error {
	g := v.g
	var small [32]uint32
	first := small[:0] // per row: the data shards this write is the first in the epoch to change
	for r := rows.lo; r < rows.hi; r++ {
		at := (r - rows.lo) * layout.ChecksumBlock
		dst := span[at : at+layout.ChecksumBlock]
		switch {
		case e.touched[r]&^noPPBit == 0:
			copy(dst, b.logP0[rows.at+at:])
		case e.pp[r] != nil:
			copy(dst, e.pp[r])
		default:
			clear(dst) // every data shard written already: no share left
		}
		first = append(first, rows.wt[r-rows.lo]&^e.touched[r])
	}
	ap := v.log.codecArgs(2*g.K + 1)
	defer v.log.putArgs(ap)
	args := *ap
	oldData, newData, parity := args[:g.K], args[g.K:2*g.K], args[2*g.K:]
	for sh := 0; sh < g.K; sh++ {
		if old, kept := v.maskRows(b, b.shards[sh], rows.at, first, sh); kept {
			oldData[sh], newData[sh] = old, v.log.zeros[:len(old)]
		}
	}
	parity[0] = span
	return v.log.row0.UpdateParity(oldData, newData, parity)
}

// ppEncode: partial parity = the first parity row of the data with every
// block written in the epoch (this write included) taken as zero.
func (v *Volume) ppEncode(b *stripeBufs, e *stripeEpoch, rows ppRows, span []byte) error {
	g := v.g
	var small [32]uint32
	unwritten := small[:0] // per row: the data shards not written in the epoch, this write included
	for r := rows.lo; r < rows.hi; r++ {
		unwritten = append(unwritten, ^(e.touched[r] | rows.wt[r-rows.lo]))
	}
	ap := v.log.codecArgs(g.K + 1)
	defer v.log.putArgs(ap)
	shards := *ap
	for sh := 0; sh < g.K; sh++ {
		shards[sh], _ = v.maskRows(b, b.shards[sh], rows.at, unwritten, sh)
	}
	shards[g.K] = span
	return v.log.row0.Encode(shards)
}

// codecArgs returns n nil shard slices for a codec call, from a pool:
// they escape to the heap through the codec's interface (which keeps
// none), and allocating them cost as much as a partial parity's GF
// arithmetic. Give them back with putArgs.
func (l *logState) codecArgs(n int) *[][]byte {
	ap, _ := l.args.Get().(*[][]byte)
	if ap == nil || cap(*ap) < n {
		ap = new([][]byte)
		*ap = make([][]byte, n)
	}
	*ap = (*ap)[:n]
	return ap
}

func (l *logState) putArgs(ap *[][]byte) {
	clear(*ap)
	l.args.Put(ap)
}

// maskRows returns the blocks of data shard sh over a span of rows, those
// of buf from byte off on, with the rows whose keep bitmap lacks sh taken
// as zeros, and whether it kept any: buf itself when it keeps every row,
// the zero chunk when none (buf unread), else a scratch copy. The caller
// only reads it.
func (v *Volume) maskRows(b *stripeBufs, buf []byte, off int64, keep []uint32, sh int) ([]byte, bool) {
	n := int64(len(keep)) * layout.ChecksumBlock
	all, some := true, false
	for _, bits := range keep {
		k := bits&(1<<sh) != 0
		all, some = all && k, some || k
	}
	switch {
	case all:
		return buf[off : off+n], true
	case !some:
		return v.log.zeros[:n], false
	}
	out := b.scratch(n)
	for i, bits := range keep {
		at := i * layout.ChecksumBlock
		if bits&(1<<sh) != 0 {
			copy(out[at:at+layout.ChecksumBlock], buf[off+int64(at):])
		} else {
			clear(out[at : at+layout.ChecksumBlock])
		}
	}
	return out, true
}

// logPlan adjusts a write plan for the log: the partial parity of a delta
// write comes from the old first parity, and the epoch-start checksums of
// a missing data shard from its reconstructed data, so a delta or
// reconstruct-write plan that lacks either becomes a rebuild (read K
// shards, reconstruct all data over the span).
func (v *Volume) logPlan(plan writePlan, usable []bool) (writePlan, error) {
	if !v.g.Log || plan.Mode == modeFull || plan.Mode == modeDataOnly || plan.Mode == modeRebuild {
		return plan, nil
	}
	ok := plan.Mode != modeDelta || usable[v.g.K]
	for sh := 0; sh < v.g.K; sh++ {
		ok = ok && usable[sh]
	}
	if ok {
		return plan, nil
	}
	if count(usable) < v.g.K {
		return plan, fmt.Errorf("write log: fewer than %d shards usable: %w", v.g.K, blockdev.ErrUnavailable)
	}
	plan.Mode, plan.Reads = modeRebuild, pickK(v.g, usable)
	return plan, nil
}
