// Package volume is nvstripe's IO engine. A Volume is a blockdev.Device whose
// bytes are striped over the slots of many namespaces and protected by
// Reed-Solomon parity (package ec), with the offset maths of volume/layout.
//
// Reads touch only the data shards they need; a missing or failing shard is
// reconstructed from any K others for the requested range only. Full-stripe
// writes encode and write K+M chunks; partial writes read-modify-write under a
// per-stripe lock, choosing delta-parity update or reconstruct-write by IO
// count (plan.go). With up to M shards of a stripe missing, IO continues
// degraded; past that it fails with a *StripeError (class
// blockdev.ErrUnavailable) and nothing unwritten is ever returned.
//
// Segments are allocated on first write through an Allocator; reads of
// unallocated space return zeros; a trim covering a whole segment frees it.
// Before the first write to a clean segment it is marked dirty in a DirtyLog;
// Clean marks idle flushed segments clean again, and Recover recomputes parity
// of dirty segments after a crash. A slot that a write or flush went around
// (its namespace unreachable) is marked in a StaleLog before that IO is
// acknowledged, so that a later open does not read its old data; Repair
// rebuilds such slots in place and clears their marks.
//
// A volume whose geometry has Checksums (format 2) keeps a crc32c of every
// 4 KiB block of every shard in a checksum area at the end of each slot,
// written with the data and durable when it is (checksum.go). Every shard
// read is verified; a mismatch heals the stripe from the other shards and
// rewrites the bad block in place (heal.go), and a block that cannot be
// healed fails the read with class blockdev.ErrCorrupt, never wrong data.
// Recover tells torn writes of dirty segments from corruption (healResync).
//
// A volume opened ReadOnly (a read-only mapping) never writes: a block that
// fails its checksum is rebuilt for the read from the other shards and
// reported, not healed. It follows moves made by another process: Follow
// switches a segment to its newly committed slots between two IOs of it.
// A volume whose geometry has Log (format 3) also logs, before each stripe
// write, a record on the stripe's parity slots from which Recover solves a
// data shard lost together with a crash mid-write (ppl.go, the write hole).
//
// Concurrency: all methods may be called from many goroutines. Requests are
// split per stripe and run concurrently; within a stripe, shard IO is issued
// in parallel. Writes to one stripe are serialised by a stripe lock; reads of
// healthy shards take no lock; degraded reads take the stripe lock so that
// they never combine data and parity of different writes. A degraded read
// whose K shard reads are not all back after Options.HedgeAfter reads one
// more shard and decodes from the first K (hedge.go); the slow read runs on
// into a buffer of its own after the read returns.
package volume

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/ec"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// blockSize is the logical block size of every volume.
const blockSize = 4096

// lockCount is the number of stripe locks; stripes hash onto them.
const lockCount = 1024

// Options configure a Volume. Zero fields take the documented defaults.
type Options struct {
	// Geometry is the layout (required; Validate must pass).
	Geometry layout.Geometry
	// Size is the volume size in bytes, a positive multiple of 4096 (required).
	Size int64
	// Devices resolves the namespaces that slots name (required).
	Devices DeviceSet
	// Alloc places segments (required).
	Alloc Allocator
	// Dirty records segments with writes in flight. Default: none (no crash
	// tracking; Recover does nothing).
	Dirty DirtyLog
	// Stale records slots that missed writes, so that a later open does not
	// read them. Default: none (a volume that is reopened after one of its
	// namespaces missed writes may read old data: tests only).
	Stale StaleLog
	// Unsettled records the blocks no recovery could settle, so that a
	// later open knows them (LoadUnsettled). Default: none (a later open
	// reads them as corrupt all the same, but does not list them).
	Unsettled UnsettledLog
	// Events receives degraded-IO, corruption and shard-error events.
	Events EventListener
	// Parallel is the number of stripes of one request in flight at once.
	// Default 16.
	Parallel int
	// ReadOnly opens the volume for reading only (a read-only mapping):
	// writes and trims fail with ErrInvalid, and a read
	// never writes: a block that does not match its checksum is rebuilt
	// from the other shards for the read and reported (EventListener.
	// Checksum, with nothing healed), not rewritten; the read-write owner or
	// a scrub heals it. Default false.
	ReadOnly bool
	// CodecOptions are passed to ec.New (tests use ec.WithSIMD(false)).
	CodecOptions []ec.Option
	// LogEpoch orders the write-log records of this open after those of
	// every earlier one (ppl.go): required (positive) for a geometry with
	// Log, and larger at every open of the volume, e.g. the owner epoch.
	LogEpoch int64
	// HedgeAfter is how long a degraded read waits for its K shard reads
	// before it reads one more shard and decodes from the first K that
	// answer (hedge.go). Default DefaultHedgeAfter; negative: never hedge.
	HedgeAfter time.Duration
}

// DefaultHedgeAfter is Options.HedgeAfter's default. A shard read of a
// chunk over NVMe/TCP takes a fraction of a millisecond and a few
// milliseconds in a healthy namespace's tail, so a read still out after
// 20 ms is stuck (a target in a GC pause, a busy disk, a path failing
// over): only such reads cost an extra shard read, and a stripe read
// waits 20 ms for one instead of the namespace's whole stall, which
// lasts up to its controller-loss timeout (seconds).
const DefaultHedgeAfter = 20 * time.Millisecond

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Dirty == nil {
		o.Dirty = nopDirtyLog{}
	}
	if o.Stale == nil {
		o.Stale = nopStaleLog{}
	}
	if o.Unsettled == nil {
		o.Unsettled = nopUnsettledLog{}
	}
	if o.Parallel <= 0 {
		o.Parallel = 16
	}
	if o.HedgeAfter == 0 {
		o.HedgeAfter = DefaultHedgeAfter
	}
}

// Validate checks the options.
func (o *Options) Validate() error {
	if err := o.Geometry.Validate(); err != nil {
		return err
	}
	if o.Size <= 0 || o.Size%blockSize != 0 {
		return fmt.Errorf("volume size %d: must be a positive multiple of %d: %w", o.Size, blockSize, blockdev.ErrInvalid)
	}
	if o.Devices == nil || o.Alloc == nil {
		return fmt.Errorf("volume options: Devices and Alloc are required: %w", blockdev.ErrInvalid)
	}
	if o.Geometry.Log && o.LogEpoch <= 0 {
		return fmt.Errorf("volume options: a volume with a write log needs a positive LogEpoch, larger at every open: %w", blockdev.ErrInvalid)
	}
	return nil
}

// Volume is an erasure-coded, striped blockdev.Device.
type Volume struct {
	g      layout.Geometry
	size   atomic.Int64 // grows only (Grow)
	codec  *ec.Codec
	devs   DeviceSet
	alloc  Allocator
	dirty  DirtyLog
	stale  StaleLog
	ev     EventListener
	par    int
	hedge  time.Duration // Options.HedgeAfter; negative: no hedged reads
	closed atomic.Bool
	sync   atomic.Bool // every namespace so far is blockdev.Synchronous
	csum   checksumCounters
	// readOnly: Options.ReadOnly.
	readOnly bool
	log      logState // the write log (format 3), ppl.go
	logStats logCounters
	// poisoned are blocks a recovery could not settle (unsettled.go),
	// recorded in unsettledLog.
	poisoned     poisonSet
	unsettledLog UnsettledLog
	// deferred are the segments Recover left dirty (repair.go).
	deferred deferredSet

	sumMu    sync.Mutex
	sumDirty map[*sumPage]*slot // checksum pages to write at the next Flush

	locks [lockCount]sync.Mutex
	bufs  sync.Pool // *[]byte of Chunk bytes

	workers *workerPool // run the calls of each and eachLimited

	allocMu sync.Mutex // serialises Lookup/Allocate on cache misses
	// staleMarks are the StaleLog's marks not yet applied to an opened
	// segment (nil: not read yet). REQUIRES: allocMu held.
	staleMarks map[int64][]StaleSlot
	mu         sync.Mutex         // guards segs, opening and ns
	segs       map[int64]*segment // nil value: known unallocated
	// opening holds the segments being looked up and opened, each closed
	// when its opener is done (see segmentFor).
	opening map[int64]chan struct{}
	ns      map[string]*nsState
}

var (
	_ blockdev.Device             = (*Volume)(nil)
	_ blockdev.FUAWriter          = (*Volume)(nil)
	_ blockdev.AllocationReporter = (*Volume)(nil)
	_ blockdev.FastZeroer         = (*Volume)(nil)
	_ blockdev.OptimalIO          = (*Volume)(nil)
	_ blockdev.Synchronous        = (*Volume)(nil)
)

// New opens a volume. It does not touch the devices until the first IO.
func New(opts Options) (*Volume, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	g := opts.Geometry
	codec, err := ec.New(g.K, g.M, opts.CodecOptions...)
	if err != nil {
		return nil, err
	}
	v := &Volume{
		g: g, codec: codec, devs: opts.Devices, alloc: opts.Alloc,
		dirty: opts.Dirty, stale: opts.Stale, unsettledLog: opts.Unsettled, ev: opts.Events, par: opts.Parallel, readOnly: opts.ReadOnly,
		segs: map[int64]*segment{}, opening: map[int64]chan struct{}{}, ns: map[string]*nsState{},
		workers: newWorkerPool(), hedge: opts.HedgeAfter,
	}
	v.size.Store(opts.Size)
	v.bufs.New = func() any { b := make([]byte, g.Chunk); return &b }
	if err := v.log.init(g, opts.LogEpoch, codec, opts.CodecOptions); err != nil {
		return nil, err
	}
	return v, nil
}

// Grow makes the volume size bytes long (a multiple of 4096, not smaller
// than now), as after its record was resized: IO may reach the new end at
// once (segments past the old end are allocated on their first write, as
// any). Shrinking is refused with ErrInvalid.
func (v *Volume) Grow(size int64) error {
	for {
		old := v.size.Load()
		if size < old || size%blockSize != 0 {
			return fmt.Errorf("volume: growing from %d to %d bytes: not a larger multiple of %d: %w", old, size, blockSize, blockdev.ErrInvalid)
		}
		if v.size.CompareAndSwap(old, size) {
			return nil
		}
	}
}

// Geometry returns the volume's layout.
func (v *Volume) Geometry() layout.Geometry { return v.g }

func (v *Volume) Size() int64    { return v.size.Load() }
func (v *Volume) BlockSize() int { return blockSize }

// OptimalIOSize is the data of one stripe (K chunks) when that is a power of
// two, else one chunk: a write of whole, aligned stripes encodes its parity
// from the data it carries, while a smaller one reads old data or parity
// back first.
func (v *Volume) OptimalIOSize() int {
	if stripe := v.g.StripeData(); stripe&(stripe-1) == 0 {
		return int(stripe)
	}
	return int(v.g.Chunk)
}

// Synchronous reports whether every namespace opened so far completes IO
// synchronously (blockdev.Synchronous, in-memory devices): the volume's IO
// then runs on the calling goroutine, except for the metadata updates of a
// segment's first write and of a degraded write.
func (v *Volume) Synchronous() bool { return v.sync.Load() }

// Close stops the volume; later calls fail with ErrUnavailable. It does not
// close the namespace devices and does not flush.
func (v *Volume) Close() error {
	v.closed.Store(true)
	v.workers.stop()
	return nil
}

func (v *Volume) check(off, n int64) error {
	if v.closed.Load() {
		return fmt.Errorf("volume closed: %w", blockdev.ErrUnavailable)
	}
	return blockdev.CheckRange(v.size.Load(), blockSize, off, n)
}

// checkWrite is check for a request that changes data.
func (v *Volume) checkWrite(off, n int64) error {
	if v.readOnly {
		return fmt.Errorf("volume opened read-only: %w", blockdev.ErrInvalid)
	}
	return v.check(off, n)
}

func (v *Volume) lock(id layout.StripeID) *sync.Mutex { return &v.locks[lockIndex(id)] }

// lockStripe takes the lock of stripe id and returns its unlock, for
// `defer v.lockStripe(id)()`.
func (v *Volume) lockStripe(id layout.StripeID) func() {
	mu := v.lock(id)
	mu.Lock()
	return mu.Unlock
}

// retryStripe runs once on stripe t of s under the stripe's lock, again
// after each shard fault (the failing shard is marked, so the next attempt
// plans without it), at most once per shard and once more.
func (v *Volume) retryStripe(s *segment, t int64, once func(id layout.StripeID) error) error {
	id := layout.StripeID{Segment: s.id, Stripe: t}
	defer v.lockStripe(id)()
	var err error
	for attempt := 0; attempt <= v.g.N(); attempt++ {
		if err = once(id); !isShardFault(err) {
			return err
		}
	}
	return err
}

func lockIndex(id layout.StripeID) int {
	h := uint64(id.Segment)*0x9E3779B97F4A7C15 + uint64(id.Stripe)
	return int(h % lockCount)
}

func (v *Volume) getBuf(n int64) (*[]byte, []byte) {
	bp := v.bufs.Get().(*[]byte)
	return bp, (*bp)[:n]
}

func (v *Volume) putBuf(bp *[]byte) { v.bufs.Put(bp) }

// each runs f(0..n-1), the shard IOs of one stripe: concurrently (f(0) on
// the calling goroutine), or one after the other when every namespace of
// the volume completes IO synchronously (blockdev.Synchronous: a goroutine
// per in-memory copy costs more than it overlaps). It returns the first
// error.
func (v *Volume) each(n int, f func(i int) error) error {
	if v.sync.Load() {
		for i := 0; i < n; i++ {
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
	}
	return v.workers.parallel(n, f)
}

// eachLimited runs f(0..n-1), the stripes of one request, with at most
// v.par calls in flight; one after the other when the volume completes IO
// synchronously (the caller's own concurrency, e.g. NBD's requests in
// flight, keeps the CPUs busy without a goroutine per stripe).
func (v *Volume) eachLimited(n int, f func(i int) error) error {
	if v.sync.Load() {
		return v.each(n, f)
	}
	if n <= v.par {
		return v.workers.parallel(n, f)
	}
	for lo := 0; lo < n; lo += v.par {
		hi := min(lo+v.par, n)
		if err := v.workers.parallel(hi-lo, func(i int) error { return f(lo + i) }); err != nil {
			return err
		}
	}
	return nil
}

// Flush makes every write acknowledged before it durable on every namespace
// that holds unflushed data. A namespace that is unreachable counts as a
// missing shard: Flush fails only when that leaves some segment with fewer
// than K shards.
func (v *Volume) Flush(ctx context.Context) error {
	if v.closed.Load() {
		return fmt.Errorf("volume closed: %w", blockdev.ErrUnavailable)
	}
	id := v.log.flushStarted()
	if err := v.flush(ctx); err != nil {
		return err
	}
	v.log.flushEnded(id)
	return nil
}

func (v *Volume) flush(ctx context.Context) error {
	if err := v.storeSums(ctx, nil); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	v.mu.Lock()
	var todo []*nsState
	for _, ns := range v.ns {
		if ns.unflushed.Swap(false) {
			todo = append(todo, ns)
		}
	}
	v.mu.Unlock()
	// The stripes written before the flush began: what a flush that
	// succeeds makes durable, and what a namespace lost may have dropped.
	taken := make([]writtenStripes, len(todo))
	for i, ns := range todo {
		taken[i] = ns.takeWritten()
	}
	lost := make([]bool, len(todo))
	flushed := make([]bool, len(todo))
	defer func() {
		for i := range todo {
			if !flushed[i] && !lost[i] {
				v.putBackWritten(taken[i]) // not flushed: the next flush covers them
			}
		}
	}()
	err := v.each(len(todo), func(i int) error {
		if todo[i].down.Load() {
			// Not flushed: a flush that reaches it again would not say
			// whether its target kept the writes from before it went down.
			todo[i].unflushed.Store(true)
			lost[i] = true
			return nil
		}
		err := todo[i].dev.Flush(ctx)
		if err != nil {
			// A flush that failed for lack of space may have dropped
			// writes it had taken (a file system that allocates at
			// writeback): as lost as an unreachable namespace.
			todo[i].unflushed.Store(true)
			c := blockdev.Class(err)
			lost[i] = c == blockdev.ErrUnavailable || c == blockdev.ErrNoSpace
			if lost[i] {
				return nil
			}
		}
		flushed[i] = err == nil
		return err
	})
	if err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	for i, ns := range todo {
		if lost[i] {
			if err := v.namespaceLost(ctx, ns, taken[i], fmt.Errorf("flush failed: %w", blockdev.ErrUnavailable)); err != nil {
				return fmt.Errorf("flush: %w", err)
			}
		}
	}
	return v.checkRedundancy()
}

// namespaceLost marks a namespace down after a failed flush (or one that
// came back after going down holding unflushed writes): the writes it took
// since its last flush may be gone, so the stripes of each of its slots
// that took them (taken, which the failed flush took, and those written
// since) become holes until repaired, recorded so before the flush
// returns. The other stripes were flushed before and stay current: a
// namespace that restarts or is cut off for a moment loses no more than
// what it did not flush.
func (v *Volume) namespaceLost(ctx context.Context, ns *nsState, taken writtenStripes, err error) error {
	ns.down.Store(true)
	lost := ns.takeWritten()
	lost.merge(taken)
	var errs []error
	for _, s := range v.cachedSegments() {
		s.io.RLock() // a move swaps slots under io held exclusively
		for i, sl := range s.slots {
			for _, c := range []*slot{sl, sl.prev.Load()} {
				if c == nil || c.ns != ns || lost[c] == nil {
					continue
				}
				s.addHoles(c, lost[c])
				v.ev.shardError(ShardInfo{NS: ns.id, Segment: s.id, Slot: i, Err: err})
				errs = append(errs, v.recordHoles(ctx, s, i, c))
			}
		}
		s.io.RUnlock()
	}
	return errors.Join(errs...)
}

// putBackWritten returns stripes a flush took to their copies' sets, when
// the flush did not make them durable.
func (v *Volume) putBackWritten(w writtenStripes) {
	for sl, rs := range w {
		for _, r := range rs {
			v.noteWritten(sl, r.From, r.To-1)
		}
	}
}

// checkRedundancy fails when some cached segment has more than M slots that
// are down or partly stale.
func (v *Volume) checkRedundancy() error {
	last := v.g.StripesPerSegment() - 1
	for _, s := range v.cachedSegments() {
		var missing []string
		s.io.RLock() // a move swaps slots under io held exclusively
		for i, sl := range s.slots {
			if !s.usable(i, last) {
				missing = append(missing, sl.ref.NS)
			}
		}
		s.io.RUnlock()
		if len(missing) > v.g.M {
			return &StripeError{Segment: s.id, Stripe: -1, Missing: missing, M: v.g.M, N: v.g.N()}
		}
	}
	return nil
}
