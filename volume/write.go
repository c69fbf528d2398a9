package volume

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// WriteAt writes p at off. See blockdev.Device.
func (v *Volume) WriteAt(ctx context.Context, p []byte, off int64) error {
	return v.write(ctx, p, off, false)
}

// WriteAtFUA writes p at off and returns once it is durable on every shard it
// reached.
func (v *Volume) WriteAtFUA(ctx context.Context, p []byte, off int64) error {
	return v.write(ctx, p, off, true)
}

func (v *Volume) write(ctx context.Context, p []byte, off int64, fua bool) error {
	if err := v.checkWrite(off, int64(len(p))); err != nil {
		return err
	}
	sios := v.g.Split(off, int64(len(p)))
	var around atomic.Bool
	err := v.eachLimited(len(sios), func(i int) error {
		return v.writeStripe(ctx, sios[i], p, fua, &around)
	})
	return v.flushAround(ctx, err, &around)
}

// flushAround flushes the volume once a write that went around a missing
// data shard (see writeStripeOnce) succeeded, before it is acknowledged.
// Such a block lives in parity alone, and the write log's record keeps no
// partial parity for a block written in its epoch: a later write to the
// same row, torn by a crash with the parities on different versions,
// would leave more unknowns than parity rows (TestDegradedWriteThenTornRow).
// After the flush the block is out of every open epoch, so the next
// record's partial parity covers it.
func (v *Volume) flushAround(ctx context.Context, err error, around *atomic.Bool) error {
	if err != nil || !around.Load() {
		return err
	}
	if err := v.Flush(ctx); err != nil {
		return fmt.Errorf("flushing a write that went around a missing data shard: %w", err)
	}
	return nil
}

// writeStripe writes the pieces of sio from p (indexed by piece.Buf). When
// the write log is full of live records it flushes the volume (holding no
// lock) and tries again. It sets around when the write went around a
// missing data shard with the write log on (flushAround).
func (v *Volume) writeStripe(ctx context.Context, sio layout.StripeIO, p []byte, fua bool, around *atomic.Bool) error {
	return v.retryLogFull(ctx, sio.ID.Segment, sio.ID.Stripe, func() error { return v.writeStripeOnce(ctx, sio, p, fua, around) })
}

// retryLogFull runs once (a write to stripe t of segment seg, or from it
// on) until it does not fail for a full write log, flushing the volume
// (holding no lock) before each retry: at once when the ring is full of
// records no flush has covered yet, once the write in flight that holds
// it ended otherwise (awaitEnd).
func (v *Volume) retryLogFull(ctx context.Context, seg, t int64, once func() error) error {
	for {
		err := once()
		if !errors.Is(err, errLogFull) {
			return err
		}
		if err := awaitEnd(ctx, err); err != nil {
			return fmt.Errorf("segment %d stripe %d: %w: %w", seg, t, errLogFull, err)
		}
		if err := v.logFlush(ctx); err != nil {
			return fmt.Errorf("flushing to free write-log space: %w", err)
		}
	}
}

func (v *Volume) writeStripeOnce(ctx context.Context, sio layout.StripeIO, p []byte, fua bool, around *atomic.Bool) error {
	if sio.Full(v.g) {
		if err := v.settled(ctx, sio.ID); err != nil { // a whole-stripe write replaces what was lost
			return err
		}
	} else {
		lo, hi := sio.Span() // the rows it rewrites parity of; the others keep theirs as it is
		if err := v.unsettled(sio.ID, -1, lo, hi); err != nil {
			return err
		}
	}
	s, err := v.acquire(ctx, sio.ID.Segment, true)
	if err != nil {
		return err
	}
	defer s.io.RUnlock()
	if err := v.beginWrite(ctx, s); err != nil {
		return err
	}
	defer v.endWrite(s)
	mu := v.lock(sio.ID)
	mu.Lock()
	defer mu.Unlock()
	// The lock may have been waited for long: a caller that gave up
	// meanwhile (an NBD client that hung up and sent the write again
	// elsewhere, maybe followed by newer data) must not write now.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("segment %d stripe %d: write not started: %w", sio.ID.Segment, sio.ID.Stripe, err)
	}
	if err := v.fillDataHoles(ctx, s, sio.ID); err != nil {
		return err
	}
	if err := v.proveRows(ctx, s, sio); err != nil {
		return err // a partial write keeps the other blocks of its rows: never parity over a stale one
	}
	healed := false
	var before [layout.MaxShards]bool // the shards usable when the write started
	for attempt := 0; attempt <= v.g.N(); attempt++ {
		usable := v.usableShards(s, sio.ID)
		if attempt == 0 {
			copy(before[:], usable)
		}
		plan, ok := planWrite(v.g, sio, usable)
		if !ok {
			return v.writeNotDone(ctx, s, sio.ID, before[:v.g.N()], usable)
		}
		if plan, err = v.logPlan(plan, usable); err != nil {
			return err
		}
		err = v.execWrite(ctx, s, sio, p, plan, fua)
		if err == nil && sio.Full(v.g) {
			v.setProven(s, sio.ID.Stripe, 0, v.g.Chunk) // written whole by this owner: its rows agree
		}
		if err == nil && v.g.Log && slices.ContainsFunc(plan.Skip, func(sh int) bool { return sh < v.g.K }) {
			around.Store(true)
		}
		if err, retry := v.healOnce(ctx, s, sio.ID, err, &healed); !retry {
			return err
		}
	}
	return err // every attempt hit a failing shard
}

// stripeBufs holds the span buffers of one stripe write.
type stripeBufs struct {
	v      *Volume
	shards [][]byte
	pool   []*[]byte
	logP0  []byte     // delta mode with a write log: the old first parity over the span
	small  [8]*[]byte // pool's first array: a write's few buffers need no allocation for it

	sums     [][]uint32 // per data shard: checksums of the blocks its piece writes, once computed (dataSums)
	sumStore []uint32
	sumSmall [8]uint32 // sumStore's first array: a small write's sums need no allocation
}

// dataSums computes the checksums of data, the piece of data shard sh a
// write puts, and keeps them for the shard's write (sumsOf).
func (b *stripeBufs) dataSums(sh int, data []byte) []uint32 {
	if b.sums == nil {
		b.sums = make([][]uint32, len(b.shards))
		b.sumStore = b.sumSmall[:0]
	}
	if n := len(data) / layout.ChecksumBlock; cap(b.sumStore)-len(b.sumStore) < n {
		// room for every data shard's piece at once: one allocation per
		// stripe instead of one each time append doubles the array
		b.sumStore = slices.Grow(b.sumStore, n*b.v.g.K)
	}
	at := len(b.sumStore)
	b.sumStore = blockSums(b.sumStore, data)
	b.sums[sh] = b.sumStore[at:len(b.sumStore):len(b.sumStore)]
	return b.sums[sh]
}

// sumsOf returns the checksums dataSums computed for shard sh, or nil.
func (b *stripeBufs) sumsOf(sh int) []uint32 {
	if b.sums == nil {
		return nil
	}
	return b.sums[sh]
}

func (b *stripeBufs) alloc(sh int, n int64) []byte {
	b.shards[sh] = b.scratch(n)
	return b.shards[sh]
}

// scratch returns a pooled buffer of n bytes (any contents), released with
// the others.
func (b *stripeBufs) scratch(n int64) []byte {
	bp, buf := b.v.getBuf(n)
	if b.pool == nil {
		b.pool = b.small[:0]
	}
	b.pool = append(b.pool, bp)
	return buf
}

func (b *stripeBufs) release() {
	for _, bp := range b.pool {
		b.v.putBuf(bp)
	}
}

// execWrite carries out a write plan. REQUIRES: stripe lock held.
func (v *Volume) execWrite(ctx context.Context, s *segment, sio layout.StripeIO, p []byte, plan writePlan, fua bool) error {
	b := &stripeBufs{v: v, shards: make([][]byte, v.g.N())}
	defer b.release()
	var err error
	switch plan.Mode {
	case modeFull:
		err = v.prepareFull(sio, p, b)
	case modeDelta:
		err = v.prepareDelta(ctx, s, sio, p, plan, b)
	case modeReconstructWrite, modeRebuild:
		err = v.prepareEncode(ctx, s, sio, p, plan, b)
	}
	if err != nil {
		return err
	}
	e, mark, err := v.logWrite(ctx, s, sio, p, plan, b)
	if err != nil {
		return err
	}
	defer v.logDone(e, mark)
	for _, sh := range plan.Skip {
		if err := v.missed(ctx, s, v.g.SlotOf(sio.ID.Stripe, sh), sio.ID.Stripe); err != nil {
			return err
		}
	}
	if len(plan.Skip) > 0 {
		v.ev.degraded(DegradedInfo{Op: "write", Segment: s.id, Stripe: sio.ID.Stripe, Missing: v.slotNames(s, sio.ID, plan.Skip)})
	}
	// Once shards start changing, finish: a write abandoned half-way would
	// leave data and parity out of step.
	ctx = context.WithoutCancel(ctx)
	return v.each(len(plan.Writes), func(i int) error {
		sh := plan.Writes[i]
		if sh >= v.g.K || plan.Mode == modeFull {
			return v.shardWrite(ctx, s, sio.ID, sh, b.shards[sh], b.sumsOf(sh), plan.Lo, fua)
		}
		pc := pieceOf(sio, sh)
		return v.shardWrite(ctx, s, sio.ID, sh, p[pc.Buf:pc.Buf+pc.Len], b.sumsOf(sh), pc.Off, fua)
	})
}

// prepareFull points the data shards at p and encodes the parity.
func (v *Volume) prepareFull(sio layout.StripeIO, p []byte, b *stripeBufs) error {
	for _, pc := range sio.Pieces {
		b.shards[pc.Shard] = p[pc.Buf : pc.Buf+pc.Len]
	}
	for sh := v.g.K; sh < v.g.N(); sh++ {
		b.alloc(sh, v.g.Chunk)
	}
	return v.codec.Encode(b.shards)
}

// prepareDelta reads the old data of the written shards and the old parity
// over the span, and applies the change to the parity.
func (v *Volume) prepareDelta(ctx context.Context, s *segment, sio layout.StripeIO, p []byte, plan writePlan, b *stripeBufs) error {
	n := plan.Hi - plan.Lo
	for _, sh := range plan.Reads {
		b.alloc(sh, n)
	}
	if err := v.readShards(ctx, s, sio.ID, plan.Reads, b.shards, plan.Lo); err != nil {
		return err
	}
	oldData := make([][]byte, v.g.K)
	newData := make([][]byte, v.g.K)
	for _, pc := range sio.Pieces {
		oldData[pc.Shard] = b.shards[pc.Shard]
		if pc.Off == plan.Lo && pc.Len == n {
			newData[pc.Shard] = p[pc.Buf : pc.Buf+pc.Len]
			continue
		}
		nb := b.scratch(n)
		copy(nb, oldData[pc.Shard])
		copy(nb[pc.Off-plan.Lo:], p[pc.Buf:pc.Buf+pc.Len])
		newData[pc.Shard] = nb
	}
	parity := make([][]byte, v.g.M)
	for sh := v.g.K; sh < v.g.N(); sh++ {
		parity[sh-v.g.K] = b.shards[sh] // nil when missing: skipped
	}
	if v.g.Log && b.shards[v.g.K] != nil {
		p0 := b.scratch(n)
		copy(p0, b.shards[v.g.K])
		b.logP0 = p0
	}
	return v.codec.UpdateParity(oldData, newData, parity)
}

// prepareEncode builds all K data shards over the span (reading what the
// write does not cover, reconstructing missing ones in rebuild mode), overlays
// the write and encodes the parity.
func (v *Volume) prepareEncode(ctx context.Context, s *segment, sio layout.StripeIO, p []byte, plan writePlan, b *stripeBufs) error {
	n := plan.Hi - plan.Lo
	for sh := 0; sh < v.g.N(); sh++ {
		b.alloc(sh, n)
	}
	if err := v.readShards(ctx, s, sio.ID, plan.Reads, b.shards, plan.Lo); err != nil {
		return err
	}
	if plan.Mode == modeRebuild {
		want := make([]bool, v.g.N())
		for sh := 0; sh < v.g.N(); sh++ {
			if !contains(plan.Reads, sh) {
				b.shards[sh] = b.shards[sh][:0]
				want[sh] = sh < v.g.K
			}
		}
		if err := v.codec.ReconstructRange(b.shards, want); err != nil {
			return fmt.Errorf("segment %d stripe %d: reconstruct: %w", s.id, sio.ID.Stripe, err)
		}
		for sh := v.g.K; sh < v.g.N(); sh++ {
			b.shards[sh] = b.shards[sh][:n]
		}
	}
	for _, pc := range sio.Pieces {
		copy(b.shards[pc.Shard][pc.Off-plan.Lo:], p[pc.Buf:pc.Buf+pc.Len])
	}
	return v.codec.Encode(b.shards)
}

func (v *Volume) readShards(ctx context.Context, s *segment, id layout.StripeID, shards []int, bufs [][]byte, off int64) error {
	return v.each(len(shards), func(i int) error {
		return v.shardRead(ctx, s, id, shards[i], bufs[shards[i]], off)
	})
}

// shardWrite writes b at chunk offset off of shard sh of stripe id, to every
// copy of the slot that must hold it, with sums, the checksums of b's
// blocks (computed here when nil). It fails with a shardFault when no copy
// took the write.
func (v *Volume) shardWrite(ctx context.Context, s *segment, id layout.StripeID, sh int, b []byte, sums []uint32, off int64, fua bool) error {
	var small [sumBatch]uint32
	if sums == nil && v.g.Checksums {
		sums = blockSums(small[:0], b)
	}
	i := v.g.SlotOf(id.Stripe, sh)
	var firstErr error
	var failed []*slot
	wrote := 0
	var own [2]*slot
	for _, sl := range s.appendWriteSlots(own[:0], i, id.Stripe) {
		err := v.slotWrite(ctx, sl, id.Stripe, off, b, sums, fua)
		if err = v.shardFailed(s, sl, i, id.Stripe, err); err == nil {
			wrote++
		} else if !isShardFault(err) {
			return err
		} else {
			failed = append(failed, sl)
			firstErr = cmp.Or(firstErr, err)
		}
	}
	if wrote > 0 {
		// Another copy took the write (a move is running): the failed
		// copy missed it (the stripe only, when it ran out of space).
		for _, sl := range failed {
			hole := sl.valid.Load() > id.Stripe && !sl.logged.Load()
			if err := v.missedCopy(ctx, s, i, id.Stripe, sl, hole); err != nil {
				return err
			}
		}
	}
	if wrote == 0 {
		if firstErr == nil {
			firstErr = &shardFault{err: fmt.Errorf("segment %d slot %d: no usable copy: %w", s.id, i, blockdev.ErrUnavailable)}
		}
		return firstErr
	}
	return nil
}

// slotWrite writes b at chunk offset off of stripe t of slot copy sl and,
// with checksums, then sums, their checksums (blockSums), with FUA when
// fua.
func (v *Volume) slotWrite(ctx context.Context, sl *slot, t, off int64, b []byte, sums []uint32, fua bool) error {
	at := t*v.g.Chunk + off
	var err error
	if fua {
		err = blockdev.WriteFUA(ctx, sl.dev, b, at)
	} else {
		err = sl.dev.WriteAt(ctx, b, at)
	}
	// Noted when it failed too: a write cut off may have landed in part,
	// and the namespace's return must not trust the stripe.
	v.noteWritten(sl, t, t)
	if err != nil {
		return err
	}
	if v.g.Checksums {
		return v.writeSums(ctx, sl, t, off, sums, fua)
	}
	return nil
}

func pieceOf(sio layout.StripeIO, sh int) layout.Piece {
	for _, pc := range sio.Pieces {
		if pc.Shard == sh {
			return pc
		}
	}
	panic(fmt.Errorf("volume: no piece for shard %d: %w", sh, blockdev.ErrInvalid))
}

func (v *Volume) slotNames(s *segment, id layout.StripeID, shards []int) []string {
	out := make([]string, len(shards))
	for i, sh := range shards {
		out[i] = s.slots[v.g.SlotOf(id.Stripe, sh)].ref.NS
	}
	return out
}
