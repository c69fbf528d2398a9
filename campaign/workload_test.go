package campaign

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/nbd/nbdtest"
)

const blockSize = 4096

// workload writes 4 KiB blocks through the owner's NBD export and keeps,
// for every block, the version it last acknowledged and the versions of
// writes after it that failed (they may or may not have landed). A block's
// content is a function of (block, version); version 0 is zeros.
type workload struct {
	addr string

	mu      sync.Mutex
	acked   map[int64]uint64
	maybe   map[int64][]uint64
	next    uint64
	writes  int // acknowledged
	failed  int
	flushes int
}

func newWorkload(addr string) *workload {
	return &workload{addr: addr, acked: map[int64]uint64{}, maybe: map[int64][]uint64{}}
}

// content is what version v of block b holds.
func content(b int64, v uint64) []byte {
	p := make([]byte, blockSize)
	if v == 0 {
		return p
	}
	r := rand.New(rand.NewPCG(uint64(b), v))
	for i := 0; i < len(p); i += 8 {
		x := r.Uint64()
		for j := range 8 {
			p[i+j] = byte(x >> (8 * j))
		}
	}
	return p
}

// dial connects to export at addr, retrying until ctx ends (the map may be
// restarting).
func dial(ctx context.Context, addr, export string) (*nbdtest.Client, error) {
	for {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := nbdtest.Dial(dctx, "tcp", addr, export)
		cancel()
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dialing %s: %w", addr, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// run writes random blocks until ctx ends, reconnecting after errors.
func (w *workload) run(ctx context.Context, rng *rand.Rand) {
	var c *nbdtest.Client
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for ctx.Err() == nil {
		if c == nil {
			var err error
			if c, err = dial(ctx, w.addr, rwVolume); err != nil {
				return
			}
		}
		b := rng.Int64N(volSize / blockSize)
		w.mu.Lock()
		w.next++
		v := w.next
		w.mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.WriteAt(wctx, content(b, v), b*blockSize)
		if err == nil && rng.IntN(32) == 0 {
			if c.Flush(wctx) == nil {
				w.mu.Lock()
				w.flushes++
				w.mu.Unlock()
			}
		}
		cancel()
		w.record(b, v, err == nil)
		if err != nil {
			c.Close()
			c = nil
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (w *workload) record(b int64, v uint64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ok {
		w.acked[b] = v
		delete(w.maybe, b)
		w.writes++
		return
	}
	w.maybe[b] = append(w.maybe[b], v)
	w.failed++
}

// verify reads every block ever written through the export at addr (a
// fresh mapping) and checks it holds its last acknowledged version or one
// of the failed writes after it; it returns the blocks checked. A block
// found holding a failed write's version takes it as acknowledged (later
// reads must agree). Blocks found holding none are reported (errLost) and
// forgotten, so that the rounds after a failed one check only what they
// write.
func (w *workload) verify(ctx context.Context, addr string) (int, error) {
	c, err := dial(ctx, addr, rwVolume)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	blocks := map[int64]bool{}
	for b := range w.acked {
		blocks[b] = true
	}
	for b := range w.maybe {
		blocks[b] = true
	}
	got := make([]byte, blockSize)
	var lost []string
	for b := range blocks {
		if err := c.ReadAt(ctx, got, b*blockSize); err != nil {
			return 0, fmt.Errorf("reading block %d: %w", b, err)
		}
		allowed := append([]uint64{w.acked[b]}, w.maybe[b]...)
		if !w.match(b, got, allowed) {
			lost = append(lost, fmt.Sprintf("block %d (offset %d) holds none of versions %v", b, b*blockSize, allowed))
			delete(w.acked, b)
			delete(w.maybe, b)
		}
	}
	if len(lost) > 0 {
		sort.Strings(lost)
		return len(blocks), fmt.Errorf("%w: %d of %d blocks: %s", errLost, len(lost), len(blocks), strings.Join(lost[:min(len(lost), 5)], "; "))
	}
	return len(blocks), nil
}

// match says whether got is one of the allowed versions of block b, and
// takes it as b's acknowledged version if so.
func (w *workload) match(b int64, got []byte, allowed []uint64) bool {
	for _, v := range allowed {
		if bytes.Equal(got, content(b, v)) {
			w.acked[b] = v
			delete(w.maybe, b)
			return true
		}
	}
	return false
}

// roVersion is the version every block of roVolume holds (so its content
// differs from any block of rwVolume's).
const roVersion = 1 << 62

// roChunk is the size of the reader's reads and of the fill's writes.
const roChunk = 64 << 10

// roContent is what roVolume holds at off, n bytes (block aligned).
func roContent(off int64, n int) []byte {
	p := make([]byte, 0, n)
	for b := off / blockSize; int64(len(p)) < int64(n); b++ {
		p = append(p, content(b, roVersion)...)
	}
	return p
}

// fill writes roVolume's content through the export at addr and flushes.
func fill(ctx context.Context, addr string) error {
	c, err := dial(ctx, addr, roVolume)
	if err != nil {
		return err
	}
	defer c.Close()
	for off := int64(0); off < roSize; off += roChunk {
		if err := c.WriteAt(ctx, roContent(off, roChunk), off); err != nil {
			return fmt.Errorf("writing offset %d: %w", off, err)
		}
	}
	return c.Flush(ctx)
}

// reader reads random chunks of roVolume through the read-only mapping and
// checks each against roVolume's content: a read may fail while a fault
// lasts, but one that succeeds must return the acknowledged data.
type reader struct {
	addr string

	mu     sync.Mutex
	ok     int
	failed int
	wrong  error // the first read that returned wrong data
}

// run reads until ctx ends, reconnecting after errors.
func (r *reader) run(ctx context.Context, rng *rand.Rand) {
	var c *nbdtest.Client
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	got := make([]byte, roChunk)
	for ctx.Err() == nil {
		if c == nil {
			var err error
			if c, err = dial(ctx, r.addr, roVolume); err != nil {
				return
			}
		}
		off := rng.Int64N(roSize/roChunk) * roChunk
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.ReadAt(rctx, got, off)
		cancel()
		if ctx.Err() != nil {
			return // the round ended: not the read's fault
		}
		r.record(off, got, err)
		if err != nil {
			c.Close()
			c = nil
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (r *reader) record(off int64, got []byte, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err != nil:
		r.failed++
	case !bytes.Equal(got, roContent(off, len(got))):
		r.failed++
		if r.wrong == nil {
			r.wrong = fmt.Errorf("%w: read-only mapping: %d bytes at offset %d differ from the acknowledged content", errLostRO, len(got), off)
		}
	default:
		r.ok++
	}
}

// wrongRead returns the first wrong read seen, if any.
func (r *reader) wrongRead() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wrong
}

// forget forgets the wrong read (after a failed round, whose recovery
// writes the content again).
func (r *reader) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wrong = nil
}

// verifyRO reads all of roVolume through the export at addr and checks it;
// it returns the bytes checked.
func verifyRO(ctx context.Context, addr string) (int64, error) {
	c, err := dial(ctx, addr, roVolume)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	got := make([]byte, roChunk)
	for off := int64(0); off < roSize; off += roChunk {
		if err := c.ReadAt(ctx, got, off); err != nil {
			return 0, fmt.Errorf("reading %s at offset %d: %w", roVolume, off, err)
		}
		if !bytes.Equal(got, roContent(off, roChunk)) {
			return 0, fmt.Errorf("%w: %s: %d bytes at offset %d differ from the acknowledged content", errLostRO, roVolume, roChunk, off)
		}
	}
	return roSize, nil
}
