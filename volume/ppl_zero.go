package volume

import (
	"context"

	"github.com/nvstripe/nvstripe/volume/layout"
)

// Zeroing whole stripes (Trim, WriteZeroes) is logged like a write that
// puts zeros in every block of every data shard. Without a record, two
// things go wrong after a crash with a lost data shard: an acknowledged
// zeroing that only partly reached the disks leaves the surviving shards
// on two versions with nothing to solve the lost one from; and a record of
// an earlier write to the stripe, still in its ring, tells recovery values
// the lost block no longer holds. Stripes that are all zeros already (as
// the checksums say) change nothing and get no record.

// zeroStripesLogged is zeroStripes for a volume with a write log: in runs
// whose records take at most a quarter of a ring (they stay live until
// the run is zeroed), each run tried again after a flush when the ring is
// full of live records.
func (v *Volume) zeroStripesLogged(ctx context.Context, s *segment, first, last int64, trim bool) error {
	batch := max(1, v.log.blocks/(4*v.g.LogHeaderBlocks(v.g.BlocksPerChunk())))
	for lo := first; lo <= last; lo += batch {
		hi := min(lo+batch-1, last)
		err := v.retryLogFull(ctx, s.id, lo, func() error { return v.zeroStripes(ctx, s, lo, hi, trim) })
		if err != nil {
			return err
		}
	}
	return nil
}

// logZero makes durable a record of zeroing each stripe of [first, last]
// of s that is not all zeros, before the zeroing starts. It returns the
// function that ends those records' writes, to call once the zeroing is
// done. REQUIRES: the stripes' locks held.
func (v *Volume) logZero(ctx context.Context, s *segment, first, last int64) (func(), error) {
	type logged struct {
		e    *stripeEpoch
		mark *writeMark
	}
	var open []logged
	done := func() {
		for _, l := range open {
			v.logDone(l.e, l.mark)
		}
	}
	if !v.g.Log {
		return done, nil
	}
	for t := first; t <= last; t++ {
		id := layout.StripeID{Segment: s.id, Stripe: t}
		e, mark, err := v.logZeroStripe(ctx, s, id)
		for attempt := 0; isShardFault(err) && attempt < v.g.N(); attempt++ {
			e, mark, err = v.logZeroStripe(ctx, s, id) // without the shard that failed
		}
		if err != nil {
			done()
			return nil, err
		}
		if e != nil {
			open = append(open, logged{e, mark})
		}
	}
	return done, nil
}

// logZeroStripe folds zeroing stripe id into its epoch and writes the
// record, unless the stripe is all zeros already or has no usable parity
// (then it returns a nil epoch; without parity, a write logs nothing
// either, and the epoch is dropped). REQUIRES: the stripe's lock held.
func (v *Volume) logZeroStripe(ctx context.Context, s *segment, id layout.StripeID) (*stripeEpoch, *writeMark, error) {
	usable := v.usableShards(s, id)
	var plan writePlan
	for sh := v.g.K; sh < v.g.N(); sh++ {
		if usable[sh] {
			plan.Writes = append(plan.Writes, sh)
		}
	}
	rows := v.g.BlocksPerChunk()
	now := make([]uint32, int64(v.g.N())*rows) // per shard, per row: the stored checksum
	zero, err := v.stripeSums(ctx, s, id, usable, now)
	if err != nil || zero {
		return nil, nil, err
	}
	if len(plan.Writes) == 0 {
		v.log.drop(id) // no ring to log to; the epoch no longer says what the stripe holds
		return nil, nil, nil
	}
	e := v.log.begin(v.g, id)
	k, zs := int64(v.g.K), blockSum(v.log.zeros[:layout.ChecksumBlock])
	for r := int64(0); r < rows; r++ {
		fresh := e.touched[r]&^noPPBit == 0
		for sh := int64(0); sh < k; sh++ {
			if fresh {
				e.sums[r*k+sh][0] = now[sh*rows+r]
			}
			e.sums[r*k+sh][1] = zs
		}
		e.touched[r] = 1<<k - 1 // every row whole: no partial parity
	}
	e.r0, e.r1 = 0, rows
	return v.writeRecords(ctx, s, plan, e, e.record(v.g, id))
}

// stripeSums fills sums (per shard, per row) with the stored checksums of
// stripe id's usable shards, and reports whether every block of every
// shard is zeros. A missing shard's are unknown: they are left at the
// checksum of zeros (its start value in a record: a solve that finds
// another fails as corrupt, never guesses) and make the stripe not all
// zeros.
func (v *Volume) stripeSums(ctx context.Context, s *segment, id layout.StripeID, usable []bool, sums []uint32) (bool, error) {
	rows := v.g.BlocksPerChunk()
	zs := blockSum(v.log.zeros[:layout.ChecksumBlock])
	zero := true
	for sh := 0; sh < v.g.N(); sh++ {
		got := sums[int64(sh)*rows : int64(sh+1)*rows]
		i := v.g.SlotOf(id.Stripe, sh)
		sl := s.readSlot(i, id.Stripe)
		if !usable[sh] || sl == nil {
			zero = false
			for r := range got {
				got[r] = zs
			}
			continue
		}
		if err := v.storedSums(ctx, sl, id.Stripe, 0, got); err != nil {
			return false, v.shardFailed(s, sl, i, id.Stripe, err)
		}
		for _, sum := range got {
			zero = zero && sum == zs
		}
	}
	return zero, nil
}
