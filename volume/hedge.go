package volume

// Hedged degraded reads, against tail latency ("The Tail at Scale", Dean and Barroso).
//
// A reconstruct read needs any K shards of its stripe over the span. It
// reads the plan's K; when they are not all back after Options.HedgeAfter,
// or one fails first, it reads one spare shard too and decodes from the
// first K that come back good. A namespace that stalls (a target in a GC
// pause, a busy disk) then costs a degraded read HedgeAfter, not the stall.
// One spare at most: one slow namespace per stripe is the case this is
// for, and a second failure makes degradedRead plan again without the
// failed shards (each fault marks its shard), which hedges again.
//
// Only reconstructRead hedges: it holds the stripe lock and runs after
// proveRows, so any K shards of the span decode to the same bytes. The
// direct path (readPieces, no stripe lock) does not. Hedging it would need
// the stripe lock, and an initiator that can abandon a command's buffer:
// a read that nvmeof/initiator has submitted writes into its buffer until
// the command completes, whatever its context says. Nor does a read of a
// segment whose resync after a crash is pending: its rows are not proven
// (hedging).
//
// A read left behind runs on after the stripe read has returned and let go
// of the stripe and segment locks. It reads into a pool buffer of its own,
// never the caller's p, and the worker that runs it hands that buffer back
// to the pool once the read ends (hedge.start); its bytes are never used,
// so a slot that a move frees meanwhile may be read by it harmlessly. Its
// errors still go through shardFailed, which needs neither lock (the
// lock-free direct path calls it too): a namespace that fails is marked
// down as after any read.
//
// A namespace with reads left behind still in flight is stalled, as far as
// the volume knows: a hedged read reads a spare shard in its place when it
// has one (hedge.pick), so that while a namespace stalls, degraded reads
// neither wait HedgeAfter for it nor leave one more read (and buffer)
// behind each; those in flight are bounded by the reads that started
// before the first was left behind.
//
// A checksum mismatch is not hedged around: it ends the attempt, and
// degradedRead heals the stripe and plans again, as without hedging. Nor
// are errors that are not shard faults (fenced, context): the read fails
// with them. A volume whose namespaces are all synchronous (in-memory)
// reads without hedging: its reads answer at once.

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/volume/layout"
)

// hedging reports whether reconstructRead hedges plan in segment s: the
// volume hedges, the stripe has a spare shard to add, its IO is not
// synchronous, and the segment's rows can be proven (proveSpan proves none
// in a segment whose resync is pending: shards of a torn row decode to
// other bytes from another K, and a read of it must not change with which
// shard was slow).
func (v *Volume) hedging(s *segment, plan readPlan) bool {
	return v.hedge > 0 && len(plan.Spare) > 0 && !v.sync.Load() && !v.resyncPending(s.id)
}

// hedgedRead is reconstructRead with a hedge: it reads K of plan.Reads and
// plan.Spare over the span (pick), and one more when they are slow or one
// fails (startSpare); it then rebuilds the pieces whose shards are not
// among the first K reads that came back good, and copies the pieces into
// p. REQUIRES: stripe lock held.
func (v *Volume) hedgedRead(ctx context.Context, s *segment, sio layout.StripeIO, p []byte, base int64, plan readPlan) error {
	h := &hedge{v: v, ctx: ctx, s: s, id: sio.ID, plan: plan, done: make(chan hedgeDone, len(plan.Reads)+1)}
	defer h.release()
	for _, sh := range h.pick() {
		h.start(sh)
	}
	if err := h.wait(); err != nil {
		return err
	}
	lo, hi := plan.Lo, plan.Hi
	shards := make([][]byte, v.g.N())
	want := make([]bool, v.g.N())
	for sh := range shards {
		if h.good[sh] {
			shards[sh] = (*h.bufs[sh])[:hi-lo]
		}
	}
	var bufs []*[]byte // ours alone: only the rebuild writes them
	defer func() {
		for _, b := range bufs {
			v.putBuf(b)
		}
	}()
	for _, pc := range sio.Pieces {
		if h.good[pc.Shard] {
			continue
		}
		want[pc.Shard] = true
		if pc.Off == lo && pc.Len == hi-lo {
			shards[pc.Shard] = p[pc.Buf-base : pc.Buf-base : pc.Buf-base+pc.Len] // rebuilt in place
			continue
		}
		bp, b := v.getBuf(hi - lo)
		bufs = append(bufs, bp)
		shards[pc.Shard] = b[:0]
	}
	return v.rebuildPieces(s, sio, p, base, lo, shards, want, plan.Rebuild)
}

// hedge is the shard reads of one hedged stripe read. Each runs on a worker
// into a pool buffer of its own and reports on done. The stripe read owns
// the buffer of a read once it has its report; release hands those back and
// leaves the others to their workers.
type hedge struct {
	v    *Volume
	ctx  context.Context
	s    *segment
	id   layout.StripeID
	plan readPlan
	done chan hedgeDone // room for every read: a worker never waits on it

	mu   sync.Mutex
	left bool // release ran: a read that ends puts its own buffer back. REQUIRES: mu held.

	// Of the stripe read's goroutine alone:
	spares   []int                      // what startSpare reads (pick)
	ns       [layout.MaxShards]*nsState // by shard, of the reads started (nil: no usable copy)
	bufs     [layout.MaxShards]*[]byte  // by shard, of the reads started
	reported [layout.MaxShards]bool     // reads whose report arrived
	good     [layout.MaxShards]bool     // reads that came back without error
	pending  int                        // reads started and not reported
	hedged   bool                       // startSpare ran
}

// pick returns the K shards to read, plan.Reads and plan.Spare in that
// order with those on a namespace that has reads left behind (stalled)
// last, and keeps the rest as the spares, the stalled ones last.
func (h *hedge) pick() []int {
	var fresh, stalled []int
	for _, sh := range append(h.plan.Reads[:len(h.plan.Reads):len(h.plan.Reads)], h.plan.Spare...) {
		if h.stalled(sh) {
			stalled = append(stalled, sh)
		} else {
			fresh = append(fresh, sh)
		}
	}
	k := h.v.g.K
	all := append(fresh, stalled...)
	h.spares = all[k:]
	return all[:k]
}

// stalled reports whether the namespace a read of shard sh reads now has
// reads left behind in flight.
func (h *hedge) stalled(sh int) bool {
	ns := h.nsOf(sh)
	return ns != nil && ns.leftBehind.Load() > 0
}

// nsOf returns the namespace that a read of shard sh reads now (nil: none).
func (h *hedge) nsOf(sh int) *nsState {
	if sl := h.s.readSlot(h.v.g.SlotOf(h.id.Stripe, sh), h.id.Stripe); sl != nil {
		return sl.ns
	}
	return nil
}

// hedgeDone is the report of the read of shard sh.
type hedgeDone struct {
	sh  int
	err error
}

// start reads shard sh over the span on a worker.
func (h *hedge) start(sh int) {
	bp, b := h.v.getBuf(h.plan.Hi - h.plan.Lo)
	ns := h.nsOf(sh)
	h.bufs[sh], h.ns[sh] = bp, ns
	h.pending++
	h.v.workers.run(func() {
		err := h.v.shardRead(h.ctx, h.s, h.id, sh, b, h.plan.Lo)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.left {
			h.v.putBuf(bp) // left behind: the read has ended, nobody else holds b
			if ns != nil {
				ns.leftBehind.Add(-1)
			}
			return
		}
		h.done <- hedgeDone{sh: sh, err: err}
	})
}

// wait collects reports until K reads came back good, starting the spare
// read when HedgeAfter passes first or a read fails with a shard fault. It
// returns at once an error that is not a shard fault, or a checksum
// mismatch (degradedRead heals); and the first fault when every read has
// reported and fewer than K came back good.
func (h *hedge) wait() error {
	timer := time.NewTimer(h.v.hedge)
	defer timer.Stop()
	var fault error
	for good := 0; good < h.v.g.K; {
		if h.pending == 0 {
			return fault
		}
		select {
		case d := <-h.done:
			h.pending--
			h.reported[d.sh] = true
			switch {
			case d.err == nil:
				h.good[d.sh] = true
				good++
			case !isShardFault(d.err) || isChecksumFault(d.err):
				return d.err
			default:
				if fault == nil {
					fault = d.err
				}
				if !h.startSpare() {
					timer.Reset(h.v.hedge)
				}
			}
		case <-timer.C:
			if !h.startSpare() {
				timer.Reset(h.v.hedge) // every spare stalled: look again
			}
		}
	}
	return nil
}

// startSpare starts the read of the first spare whose namespace is not
// stalled now (pick), once, and reports the hedge. It returns false when
// every spare is stalled: the caller tries again later (a read left
// behind ends, or the reads it waits for answer first).
func (h *hedge) startSpare() bool {
	if h.hedged {
		return true
	}
	i := slices.IndexFunc(h.spares, func(sh int) bool { return !h.stalled(sh) })
	if i < 0 {
		return len(h.spares) == 0 // no spare at all: nothing to try again
	}
	h.hedged = true
	sh := h.spares[i]
	var slow []int
	for s, bp := range h.bufs {
		if bp != nil && !h.good[s] {
			slow = append(slow, s)
		}
	}
	h.start(sh)
	h.v.ev.hedged(HedgeInfo{Segment: h.id.Segment, Stripe: h.id.Stripe, Slow: h.v.namespacesOf(h.s, h.id, slow),
		Extra: h.v.namespacesOf(h.s, h.id, []int{sh})[0]})
	return true
}

// release hands back the buffers of the reads that reported and counts
// the others left behind on their namespaces; from then on a read that
// ends puts its own buffer back and uncounts itself (start).
func (h *hedge) release() {
	h.mu.Lock()
	h.left = true
	for len(h.done) > 0 { // no read reports after left: the length only falls
		h.reported[(<-h.done).sh] = true
	}
	for sh, bp := range h.bufs {
		if bp != nil && !h.reported[sh] && h.ns[sh] != nil {
			h.ns[sh].leftBehind.Add(1)
		}
	}
	h.mu.Unlock()
	for sh, bp := range h.bufs {
		if bp != nil && h.reported[sh] {
			h.v.putBuf(bp)
		}
	}
}
