package volume

import (
	"context"
	"errors"
	"fmt"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// ReadAt reads len(p) bytes at off. See blockdev.Device.
func (v *Volume) ReadAt(ctx context.Context, p []byte, off int64) error {
	if err := v.check(off, int64(len(p))); err != nil {
		return err
	}
	sios := v.g.Split(off, int64(len(p)))
	return v.eachLimited(len(sios), func(i int) error {
		sio := sios[i]
		lo := sio.Pieces[0].Buf
		n := sio.Pieces[len(sio.Pieces)-1].Buf + sio.Pieces[len(sio.Pieces)-1].Len - lo
		return v.readStripe(ctx, sio, p[lo:lo+n], lo)
	})
}

// readStripe reads one stripe's pieces into p, which starts at request offset
// base (piece.Buf - base indexes p).
func (v *Volume) readStripe(ctx context.Context, sio layout.StripeIO, p []byte, base int64) error {
	s, err := v.acquire(ctx, sio.ID.Segment, false)
	if err != nil {
		return err
	}
	if s == nil {
		clear(p)
		return nil
	}
	defer s.io.RUnlock()
	if err := v.unsettledPieces(sio); err != nil {
		return err // never the block as it reads: a blank, or zeros a resync kept
	}
	var u [layout.MaxShards]bool
	if plan, _ := planRead(v.g, sio, v.usableInto(u[:v.g.N()], s, sio.ID)); plan.Mode == readDirect && v.proven(s, sio) {
		if err := v.readPieces(ctx, s, sio, p, base); !isShardFault(err) {
			return err
		}
	}
	mu := v.lock(sio.ID)
	mu.Lock()
	defer mu.Unlock()
	if err := v.proveRows(ctx, s, sio); err != nil {
		return err
	}
	err = v.degradedRead(ctx, s, sio, p, base)
	if isChecksumFault(err) && v.stripeUnsettled(sio.ID) && v.readMarked(ctx, s, sio, p, base) == nil {
		return nil
	}
	return err
}

// unsettledPieces fails with class ErrCorrupt when a piece of sio holds
// a known unsettled block (Volume.Unsettled), whatever its shard holds
// now: no write wrote that, and a read must not return it.
func (v *Volume) unsettledPieces(sio layout.StripeIO) error {
	if !v.poisoned.any.Load() {
		return nil
	}
	for _, pc := range sio.Pieces {
		if err := v.unsettled(sio.ID, pc.Shard, pc.Off, pc.Off+pc.Len); err != nil {
			return err
		}
	}
	return nil
}

// readPieces reads every piece of sio from its own shard.
func (v *Volume) readPieces(ctx context.Context, s *segment, sio layout.StripeIO, p []byte, base int64) error {
	return v.each(len(sio.Pieces), func(i int) error {
		pc := sio.Pieces[i]
		return v.shardRead(ctx, s, sio.ID, pc.Shard, p[pc.Buf-base:pc.Buf-base+pc.Len], pc.Off)
	})
}

// usableShards returns, by shard index, which shards of the stripe can serve IO.
func (v *Volume) usableShards(s *segment, id layout.StripeID) []bool {
	return v.usableInto(make([]bool, v.g.N()), s, id)
}

// usableInto fills u (len N) with which shards of the stripe can serve IO.
func (v *Volume) usableInto(u []bool, s *segment, id layout.StripeID) []bool {
	for sh := range u {
		u[sh] = s.usable(v.g.SlotOf(id.Stripe, sh), id.Stripe)
	}
	return u
}

// degradedRead reads sio after a shard fault or with a piece's shard
// missing: it plans again from the shards usable now (a fault marks its
// shard) until a plan succeeds, fewer than K shards are left, or every shard
// has failed once. A block that does not match its checksum has the stripe
// healed once (healStripe) and the read planned again; if it still does not
// match, the read fails with class ErrCorrupt. REQUIRES: stripe lock held.
func (v *Volume) degradedRead(ctx context.Context, s *segment, sio layout.StripeIO, p []byte, base int64) error {
	var err error
	healed := false
	var bad [layout.MaxShards]bool // read-only: shards that failed their checksums
	for attempt := 0; attempt <= v.g.N(); attempt++ {
		usable := v.usableShards(s, sio.ID)
		for sh := range usable {
			usable[sh] = usable[sh] && !bad[sh]
		}
		plan, ok := planRead(v.g, sio, usable)
		switch {
		case !ok && err != nil && isChecksumFault(err):
			return fmt.Errorf("segment %d stripe %d: more shards bad than parity can rebuild: %w", sio.ID.Segment, sio.ID.Stripe, err)
		case !ok && v.overStale(s, sio.ID):
			return v.readOverStale(ctx, s, sio, p, base)
		case !ok:
			return v.stripeError(s, sio.ID, usable)
		case plan.Mode == readDirect:
			err = v.readPieces(ctx, s, sio, p, base)
		default:
			err = v.reconstructRead(ctx, s, sio, p, base, plan)
		}
		if v.readOnly && isChecksumFault(err) {
			v.readAround(s, sio.ID, err, &bad)
			continue
		}
		if err, retry := v.healOnce(ctx, s, sio.ID, err, &healed); !retry {
			return err
		}
	}
	return err // every attempt hit a failing shard
}

// readAround is a read-only volume's answer to a block that does not
// match its checksum: it writes nothing (the read-write owner or a scrub
// heals), counts and reports the block, and leaves its shard out of the
// stripe's next plan, which reconstructs it from the others.
func (v *Volume) readAround(s *segment, id layout.StripeID, err error, bad *[layout.MaxShards]bool) {
	var ce *ChecksumError
	if !errors.As(err, &ce) {
		return
	}
	bad[v.g.ShardIn(id.Stripe, ce.Slot)] = true
	v.csum.mismatches.Add(1)
	if v.ev.Checksum != nil {
		v.ev.Checksum(ChecksumInfo{NS: ce.NS, Segment: s.id, Slot: ce.Slot, Stripe: id.Stripe, Offset: ce.Offset, Blocks: 1})
	}
}

// healOnce decides what a stripe IO does after err (REQUIRES: stripe lock
// held): retry after a shard fault; after a checksum mismatch, heal the
// stripe and retry the first time, fail with the mismatch (class
// ErrCorrupt) the second; stop on anything else.
func (v *Volume) healOnce(ctx context.Context, s *segment, id layout.StripeID, err error, healed *bool) (error, bool) {
	if !isChecksumFault(err) {
		return err, isShardFault(err)
	}
	if *healed {
		return fmt.Errorf("segment %d stripe %d: more shards bad than parity can heal: %w", id.Segment, id.Stripe, err), false
	}
	*healed = true
	if herr := v.healStripe(ctx, s, id, healRead); herr != nil && !isShardFault(herr) {
		return herr, false
	}
	return err, true
}

// reconstructRead carries out a reconstruct plan: it reads plan.Reads over
// the span (straight into p where a piece is exactly the span), rebuilds
// plan.Rebuild and copies the pieces into p. A plan with a spare shard is
// read hedged when the volume hedges (hedgedRead). REQUIRES: stripe lock
// held.
func (v *Volume) reconstructRead(ctx context.Context, s *segment, sio layout.StripeIO, p []byte, base int64, plan readPlan) error {
	for _, sh := range plan.Rebuild {
		pc := pieceOf(sio, sh)
		if err := v.unsettled(sio.ID, sh, pc.Off, pc.Off+pc.Len); err != nil {
			return err
		}
	}
	if v.hedging(s, plan) {
		return v.hedgedRead(ctx, s, sio, p, base, plan)
	}
	lo, hi := plan.Lo, plan.Hi
	shards := make([][]byte, v.g.N())
	want := make([]bool, v.g.N())
	for _, sh := range plan.Rebuild {
		want[sh] = true
	}
	var bufs []*[]byte
	defer func() {
		for _, b := range bufs {
			v.putBuf(b)
		}
	}()
	direct := map[int][]byte{} // shards whose piece is exactly the span
	for _, pc := range sio.Pieces {
		if pc.Off == lo && pc.Len == hi-lo {
			direct[pc.Shard] = p[pc.Buf-base : pc.Buf-base+pc.Len]
		}
	}
	for sh := range shards {
		b, isDirect := direct[sh]
		if !isDirect {
			bp, buf := v.getBuf(hi - lo)
			bufs = append(bufs, bp)
			b = buf
		}
		if want[sh] {
			b = b[:0]
		}
		shards[sh] = b
	}
	reads := plan.Reads
	err := v.each(len(reads), func(i int) error {
		return v.shardRead(ctx, s, sio.ID, reads[i], shards[reads[i]], lo)
	})
	if err != nil {
		return err
	}
	for sh := range shards {
		if !want[sh] && !contains(reads, sh) {
			shards[sh] = shards[sh][:0]
		}
	}
	return v.rebuildPieces(s, sio, p, base, lo, shards, want, plan.Rebuild)
}

// rebuildPieces rebuilds the shards marked in want from the others in
// shards (present ones hold the span from chunk offset lo), copies every
// piece of sio into p and reports the degraded read, whose missing shards
// are those of plan.Rebuild.
func (v *Volume) rebuildPieces(s *segment, sio layout.StripeIO, p []byte, base, lo int64, shards [][]byte, want []bool, rebuild []int) error {
	if err := v.codec.ReconstructRange(shards, want); err != nil {
		return fmt.Errorf("segment %d stripe %d: reconstruct: %w", sio.ID.Segment, sio.ID.Stripe, err)
	}
	for _, pc := range sio.Pieces {
		dst := p[pc.Buf-base : pc.Buf-base+pc.Len]
		if src := shards[pc.Shard][pc.Off-lo : pc.Off-lo+pc.Len]; &src[0] != &dst[0] {
			copy(dst, src)
		}
	}
	v.ev.degraded(DegradedInfo{Op: "read", Segment: sio.ID.Segment, Stripe: sio.ID.Stripe, Missing: v.namespacesOf(s, sio.ID, rebuild)})
	return nil
}

// namespacesOf names the namespaces of shards of stripe id.
func (v *Volume) namespacesOf(s *segment, id layout.StripeID, shards []int) []string {
	var out []string
	for _, sh := range shards {
		out = append(out, s.slots[v.g.SlotOf(id.Stripe, sh)].ref.NS)
	}
	return out
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// shardRead reads shard sh of stripe id at chunk offset off into b. A failure
// marks the shard's slot (unavailable: namespace down; corrupt: slot stale)
// and comes back as a shardFault.
func (v *Volume) shardRead(ctx context.Context, s *segment, id layout.StripeID, sh int, b []byte, off int64) error {
	i := v.g.SlotOf(id.Stripe, sh)
	sl := s.readSlot(i, id.Stripe)
	if sl == nil {
		return &shardFault{err: fmt.Errorf("segment %d slot %d: no usable copy: %w", s.id, i, blockdev.ErrUnavailable)}
	}
	err := sl.dev.ReadAt(ctx, b, v.g.SlotOffset(id)+off)
	if err == nil && v.g.Checksums {
		if err = v.verify(ctx, s, i, sl, id.Stripe, off, b); isChecksumFault(err) {
			return &shardFault{err: err} // the caller heals the stripe
		}
	}
	return v.shardFailed(s, sl, i, id.Stripe, err)
}

// shardFault is a shard IO error the volume works around by treating the shard
// as missing.
type shardFault struct{ err error }

func (f *shardFault) Error() string { return f.err.Error() }
func (f *shardFault) Unwrap() error { return f.err }

func isShardFault(err error) bool {
	if err == nil {
		return false // errors.As would allocate its target on every IO
	}
	var f *shardFault
	return errors.As(err, &f)
}

// shardFailed classifies a shard IO error on copy sl of slot i. Unavailable
// marks the namespace down; corrupt marks the copy stale from stripe t; no
// space makes stripe t a hole in the copy (holes.go), the namespace stays up.
// All three become shardFaults. Other errors (fenced, invalid, context) pass
// through.
func (v *Volume) shardFailed(s *segment, sl *slot, i int, t int64, err error) error {
	if err == nil {
		return nil
	}
	info := ShardInfo{NS: sl.ref.NS, Segment: s.id, Slot: i, Err: err}
	wrapped := fmt.Errorf("segment %d slot %d (namespace %s): %w", s.id, i, sl.ref.NS, err)
	switch blockdev.Class(err) {
	case blockdev.ErrUnavailable:
		sl.ns.down.Store(true)
		v.ev.shardError(info)
	case blockdev.ErrCorrupt:
		sl.lowerValid(t)
		v.ev.corruption(info)
	case blockdev.ErrNoSpace:
		s.addHole(sl, t)
	default:
		return wrapped
	}
	return &shardFault{err: wrapped}
}

func (v *Volume) stripeError(s *segment, id layout.StripeID, usable []bool) error {
	e := &StripeError{Segment: id.Segment, Stripe: id.Stripe, M: v.g.M, N: v.g.N()}
	for sh, u := range usable {
		if !u {
			e.Missing = append(e.Missing, s.slots[v.g.SlotOf(id.Stripe, sh)].ref.NS)
		}
	}
	return e
}
