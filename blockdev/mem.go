package blockdev

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
)

// Mem is an in-memory Device, sparse in pages of 1 MiB: a page is allocated
// on its first write, unallocated space reads as zeros, and a Trim or
// WriteZeroes covering a whole page releases it, so a large, mostly empty Mem
// is cheap. IO on disjoint ranges runs in parallel (it locks 64 KiB spans of
// a page); overlapping IO is serialised.
//
// A crashable Mem (NewCrashableMem) also remembers which writes are not yet
// durable: CrashClone returns the device as it would come back after a power
// loss. A plain Mem keeps no such record and runs at memory speed.
//
// Every context argument is checked once at the start of a call: a call with
// a done context fails with the context's error and touches nothing.
type Mem struct {
	size   int64
	bs     int
	cur    *pageStore
	crash  *memCrash // nil unless crashable
	closed atomic.Bool
	down   atomic.Bool
}

var (
	_ Device             = (*Mem)(nil)
	_ FUAWriter          = (*Mem)(nil)
	_ AllocationReporter = (*Mem)(nil)
)

// memCrash is the durability record of a crashable Mem.
//
// Invariant: applying log in order to durable gives the current contents.
type memCrash struct {
	mu      sync.Mutex
	durable *pageStore  // REQUIRES: mu held
	log     []memRecord // writes since the last Flush; REQUIRES: mu held
}

// memRecord is one unflushed write (data != nil) or zeroing (data == nil).
type memRecord struct {
	off  int64
	n    int64
	data []byte
	fua  bool
}

// NewMem returns an empty (all zeros) in-memory device of size bytes with the
// given block size. size must be a non-negative multiple of blockSize, and
// blockSize a power of two from 512 to 4096; otherwise the error has class
// ErrInvalid.
func NewMem(size int64, blockSize int) (*Mem, error) {
	if blockSize < 512 || blockSize > 4096 || blockSize&(blockSize-1) != 0 {
		return nil, fmt.Errorf("mem: block size %d is not a power of two from 512 to 4096: %w", blockSize, ErrInvalid)
	}
	if size < 0 || size%int64(blockSize) != 0 {
		return nil, fmt.Errorf("mem: size %d is not a non-negative multiple of block size %d: %w", size, blockSize, ErrInvalid)
	}
	return &Mem{size: size, bs: blockSize, cur: newPageStore(size)}, nil
}

// NewCrashableMem is NewMem for a device that tracks unflushed writes, so that
// CrashClone and CrashCloneRand can simulate a power loss. Writes to it are
// serialised and copied once more; use it in crash tests, not benchmarks.
func NewCrashableMem(size int64, blockSize int) (*Mem, error) {
	m, err := NewMem(size, blockSize)
	if err != nil {
		return nil, err
	}
	m.crash = &memCrash{durable: newPageStore(size)}
	return m, nil
}

// SetUnavailable makes every later call fail with ErrUnavailable (true) or
// serve again (false); the contents are kept. It simulates a device that
// went away and came back.
func (m *Mem) SetUnavailable(down bool) { m.down.Store(down) }

// Synchronous reports true: Mem IO is a memory copy on the caller's
// goroutine.
func (m *Mem) Synchronous() bool { return true }

func (m *Mem) Size() int64    { return m.size }
func (m *Mem) BlockSize() int { return m.bs }

// check validates a call; see the Device contract for the order of errors.
func (m *Mem) check(ctx context.Context, off, n int64) error {
	if m.closed.Load() {
		return fmt.Errorf("mem: closed: %w", ErrUnavailable)
	}
	if m.down.Load() {
		return fmt.Errorf("mem: set unavailable: %w", ErrUnavailable)
	}
	if err := CheckRange(m.size, m.bs, off, n); err != nil {
		return fmt.Errorf("mem: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mem: %w", err)
	}
	return nil
}

func (m *Mem) ReadAt(ctx context.Context, p []byte, off int64) error {
	if err := m.check(ctx, off, int64(len(p))); err != nil {
		return err
	}
	m.cur.read(p, off)
	return nil
}

func (m *Mem) WriteAt(ctx context.Context, p []byte, off int64) error {
	return m.write(ctx, p, off, false)
}

// WriteAtFUA writes p at off durably: on a crashable Mem the write survives
// CrashClone even without a Flush.
func (m *Mem) WriteAtFUA(ctx context.Context, p []byte, off int64) error {
	return m.write(ctx, p, off, true)
}

func (m *Mem) write(ctx context.Context, p []byte, off int64, fua bool) error {
	if err := m.check(ctx, off, int64(len(p))); err != nil {
		return err
	}
	if len(p) == 0 {
		return nil
	}
	if m.crash == nil {
		m.cur.write(p, off)
		return nil
	}
	c := m.crash
	c.mu.Lock()
	defer c.mu.Unlock()
	m.cur.write(p, off)
	rec := memRecord{off: off, n: int64(len(p)), data: append([]byte(nil), p...), fua: fua}
	c.log = append(c.log, rec)
	return nil
}

// WriteZeroes zeroes the range, releasing the pages it covers whole.
func (m *Mem) WriteZeroes(ctx context.Context, off, n int64) error {
	return m.zero(ctx, off, n)
}

// Trim is WriteZeroes: the range reads as zeros afterwards.
func (m *Mem) Trim(ctx context.Context, off, n int64) error {
	return m.zero(ctx, off, n)
}

func (m *Mem) zero(ctx context.Context, off, n int64) error {
	if err := m.check(ctx, off, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if m.crash == nil {
		m.cur.zero(off, n)
		return nil
	}
	c := m.crash
	c.mu.Lock()
	defer c.mu.Unlock()
	m.cur.zero(off, n)
	c.log = append(c.log, memRecord{off: off, n: n})
	return nil
}

// Flush makes every write that completed before it durable (crashable Mem).
func (m *Mem) Flush(ctx context.Context) error {
	if err := m.check(ctx, 0, 0); err != nil {
		return err
	}
	if m.crash == nil {
		return nil
	}
	c := m.crash
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.log {
		r.apply(c.durable)
	}
	c.log = nil
	return nil
}

// Allocated reports the allocated pages inside the range, clipped to it.
func (m *Mem) Allocated(ctx context.Context, off, n int64) ([]Extent, error) {
	if err := m.check(ctx, off, n); err != nil {
		return nil, err
	}
	return m.cur.allocated(off, n), nil
}

// Close releases the memory of the current contents. Calls after Close fail
// with ErrUnavailable; CrashClone still works on a crashable Mem.
func (m *Mem) Close() error {
	if m.closed.Swap(true) {
		return nil
	}
	m.cur.release()
	return nil
}

// Crashable reports whether m tracks unflushed writes.
func (m *Mem) Crashable() bool { return m.crash != nil }

// CrashClone returns a new crashable Mem holding what m would hold after a
// power loss now: every write completed before the last completed Flush,
// plus every FUA write, and no other write since that Flush. m is unchanged.
// A Mem made by NewMem has no volatile cache (every completed write is
// durable): its clone is a plain Mem holding everything written.
func (m *Mem) CrashClone() *Mem {
	return m.crashClone(func(memRecord, int64) bool { return false })
}

// CrashCloneRand is CrashClone, except that each block written (or zeroed)
// since the last Flush is also kept with probability 1/2, decided by r, as a
// volatile cache writing back part of its contents would. Blocks are
// replayed in write order, so a block holds one of the values it ever held
// since the last Flush, or its flushed value.
func (m *Mem) CrashCloneRand(r *rand.Rand) *Mem {
	return m.crashClone(func(memRecord, int64) bool { return r.Intn(2) == 0 })
}

// crashClone builds the clone, replaying FUA records whole and each block of
// the other unflushed records for which keep returns true.
func (m *Mem) crashClone(keep func(rec memRecord, blockOff int64) bool) *Mem {
	c := m.crash
	if c == nil {
		return &Mem{size: m.size, bs: m.bs, cur: m.cur.clone()}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.durable.clone()
	bs := int64(m.bs)
	for _, r := range c.log {
		if r.fua {
			r.apply(st)
			continue
		}
		for b := int64(0); b < r.n; b += bs {
			if keep(r, b) {
				r.block(b, bs).apply(st)
			}
		}
	}
	return &Mem{size: m.size, bs: m.bs, cur: st, crash: &memCrash{durable: st.clone()}}
}

func (r memRecord) apply(s *pageStore) {
	if r.data == nil {
		s.zero(r.off, r.n)
	} else {
		s.write(r.data, r.off)
	}
}

// block returns the part of r covering [b, b+n) relative to r.off.
func (r memRecord) block(b, n int64) memRecord {
	out := memRecord{off: r.off + b, n: n, fua: r.fua}
	if r.data != nil {
		out.data = r.data[b : b+n]
	}
	return out
}
