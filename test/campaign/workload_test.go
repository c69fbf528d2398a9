package campaign

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/nbd/nbdtest"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

const blockSize = 4096

// workload writes and reads 4 KiB blocks through the owner's NBD export
// from several workers at once (each its own connection), and keeps, for
// every block, the version it last acknowledged and the versions of writes
// after it that failed (they may or may not have landed). Two workers
// never write one block at once (a worker that picks a block being written
// reads it instead), so that the last acknowledged write of a block is
// its content; reads overlap writes freely. Every read and write goes to
// the round's history (hist), which is checked for linearizability. A
// block's content is a function of (block, version); version 0 is zeros.
type workload struct {
	addr string

	mu      sync.Mutex
	hist    *history
	acked   map[int64]uint64
	maybe   map[int64][]uint64
	unknown map[int64]bool // lost in an earlier round: content not known
	// refused: a write failed with EIO (the volume refused it: faults past
	// what parity covers). unsettled: blocks of failed writes found
	// unreadable (EIO) after such a round, until written again.
	refused   bool
	unsettled map[int64]bool
	busy      map[int64]bool // being written
	next      uint64
	writes    int // acknowledged
	failed    int
	flushes   int
	reads     int // successful reads of the owner's export
}

func newWorkload(addr string) *workload {
	return &workload{addr: addr, hist: newHistory(), acked: map[int64]uint64{}, maybe: map[int64][]uint64{}, unknown: map[int64]bool{}, busy: map[int64]bool{}, unsettled: map[int64]bool{}}
}

// workers is how many connections the workload writes and reads through.
const workers = 3

// hotBlocks are the blocks half of the operations pick (spread over the
// volume's segments), so that writes and reads of one block overlap.
const hotBlocks = 32

// content is what version v of block b holds: b and v, then bytes drawn
// from them, so that a read maps to the one write that wrote it.
func content(b int64, v uint64) []byte {
	p := make([]byte, blockSize)
	if v == 0 {
		return p
	}
	binary.LittleEndian.PutUint64(p, uint64(b))
	binary.LittleEndian.PutUint64(p[8:], v)
	r := rand.New(rand.NewPCG(uint64(b), v))
	for i := 16; i < len(p); i += 8 {
		x := r.Uint64()
		for j := range 8 {
			p[i+j] = byte(x >> (8 * j))
		}
	}
	return p
}

// version is the version block b's content p holds, badValue when it is
// none (another block's content, torn, corrupt).
func version(b int64, p []byte) uint64 {
	v := binary.LittleEndian.Uint64(p[8:])
	if v == badValue || v == anyValue || !bytes.Equal(p, content(b, v)) {
		return badValue
	}
	return v
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

// begin starts a round's history: it returns each block's value as the
// round begins (anyValue where a failed write may have landed or an
// earlier round lost it).
func (w *workload) begin(h *history) func(blockKey) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hist = h
	start := map[int64]uint64{}
	for b, v := range w.acked {
		start[b] = v
	}
	for b := range w.maybe {
		start[b] = anyValue
	}
	for b := range w.unknown {
		start[b] = anyValue
	}
	return func(k blockKey) uint64 {
		if k.volume == roVolume {
			return roVersion
		}
		return start[k.block]
	}
}

// run runs the workers until ctx ends.
func (w *workload) run(ctx context.Context, rng *rand.Rand) {
	var wg sync.WaitGroup
	for range workers {
		r := rand.New(rand.NewPCG(rng.Uint64(), 3))
		wg.Go(func() { w.work(ctx, r) })
	}
	wg.Wait()
}

// work writes (two in three) and reads random blocks until ctx ends,
// reconnecting after errors.
func (w *workload) work(ctx context.Context, rng *rand.Rand) {
	var c *nbdtest.Client
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	h := w.history()
	client := h.client()
	for ctx.Err() == nil {
		if c == nil {
			var err error
			if c, err = dial(ctx, w.addr, rwVolume); err != nil {
				return
			}
		}
		b := rng.Int64N(volSize / blockSize)
		if rng.IntN(2) == 0 {
			b = rng.Int64N(hotBlocks) * (volSize / blockSize / hotBlocks)
		}
		var err error
		if v, ok := w.claim(b, rng.IntN(3) != 0); ok {
			err = w.write(ctx, c, rng, h, client, b, v)
		} else {
			err = w.read(ctx, c, h, client, b)
		}
		if err != nil {
			c.Close()
			c = nil
			client = h.client()
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (w *workload) history() *history {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hist
}

// claim takes block b for a write of a new version when write is asked
// and nobody writes b; false: read it.
func (w *workload) claim(b int64, write bool) (uint64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !write || w.busy[b] {
		return 0, false
	}
	w.busy[b] = true
	w.next++
	return w.next, true
}

// write writes version v of block b (now and then flushing) and records it.
func (w *workload) write(ctx context.Context, c *nbdtest.Client, rng *rand.Rand, h *history, client int, b int64, v uint64) error {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	call := h.now()
	err := c.WriteAt(wctx, content(b, v), b*blockSize)
	h.write(client, blockKey{rwVolume, b}, v, call, h.now(), err)
	if err == nil && rng.IntN(32) == 0 {
		if c.Flush(wctx) == nil {
			w.mu.Lock()
			w.flushes++
			w.mu.Unlock()
		}
	}
	w.record(b, v, err == nil)
	if isEIO(err) {
		w.mu.Lock()
		w.refused = true
		w.mu.Unlock()
	}
	return err
}

// read reads block b and records what it returned.
func (w *workload) read(ctx context.Context, c *nbdtest.Client, h *history, client int, b int64) error {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := make([]byte, blockSize)
	call := h.now()
	err := c.ReadAt(rctx, got, b*blockSize)
	ret := h.now()
	switch {
	case ctx.Err() != nil:
		return err // the round ended: not the read's fault
	case err != nil:
		h.readFailed()
		return err
	}
	h.read(client, blockKey{rwVolume, b}, version(b, got), call, ret)
	w.mu.Lock()
	w.reads++
	w.mu.Unlock()
	return nil
}

func (w *workload) record(b int64, v uint64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.busy, b)
	if ok {
		w.acked[b] = v
		delete(w.maybe, b)
		delete(w.unknown, b)
		delete(w.unsettled, b)
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
// reads must agree). Blocks found holding none, or reading EIO where that
// is not allowed, are reported (errLost) and forgotten, so that the rounds
// after a failed one check only what they write (not the same lost block
// again and again). A block of failed writes (never acknowledged) may read
// EIO once a write was refused with EIO: a write that went past what
// parity covers can leave its row with shards on two versions, which the
// volume refuses to read (unsettled); such blocks are counted
// (unsettledBlocks), not reported. Any other error ends the check.
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
	h := w.hist
	client := h.client()
	for b := range blocks {
		call := h.now()
		err := c.ReadAt(ctx, got, b*blockSize)
		if isEIO(err) && len(w.maybe[b]) > 0 && (w.refused || w.unsettled[b]) {
			w.unsettled[b] = true
			h.readFailed()
			continue
		}
		if isEIO(err) {
			h.readFailed()
			lost = append(lost, fmt.Sprintf("block %d (offset %d) reads EIO, last acknowledged version %d", b, b*blockSize, w.acked[b]))
			w.forget(b)
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("reading block %d: %w", b, err)
		}
		delete(w.unsettled, b)
		h.read(client, blockKey{rwVolume, b}, version(b, got), call, h.now())
		allowed := append([]uint64{w.acked[b]}, w.maybe[b]...)
		if !w.match(b, got, allowed) {
			lost = append(lost, fmt.Sprintf("block %d (offset %d) holds none of versions %v", b, b*blockSize, allowed))
			w.forget(b)
		}
	}
	if len(lost) > 0 {
		sort.Strings(lost)
		return len(blocks), fmt.Errorf("%w: %d of %d blocks: %s", errLost, len(lost), len(blocks), strings.Join(lost[:min(len(lost), 5)], "; "))
	}
	return len(blocks), nil
}

// forget drops what verify knew of block b after reporting it: its value
// is unknown until the workload writes it again. REQUIRES: w.mu held.
func (w *workload) forget(b int64) {
	delete(w.acked, b)
	delete(w.maybe, b)
	delete(w.unsettled, b)
	w.unknown[b] = true
}

// unsettledBlocks returns how many blocks of failed writes read EIO at
// the last verify.
func (w *workload) unsettledBlocks() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.unsettled)
}

// isEIO reports whether err is the export's answer EIO.
func isEIO(err error) bool {
	var e *nbdtest.Error
	return errors.As(err, &e) && e.Errno == proto.EIO
}

// match says whether got is one of the allowed versions of block b, and
// takes it as b's acknowledged version if so.
func (w *workload) match(b int64, got []byte, allowed []uint64) bool {
	for _, v := range allowed {
		if bytes.Equal(got, content(b, v)) {
			w.acked[b] = v
			delete(w.maybe, b)
			delete(w.unknown, b)
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
	hist   *history // the round's: every successful read, block by block
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
	h := r.history()
	client := h.client()
	for ctx.Err() == nil {
		if c == nil {
			var err error
			if c, err = dial(ctx, r.addr, roVolume); err != nil {
				return
			}
		}
		off := rng.Int64N(roSize/roChunk) * roChunk
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		call := h.now()
		err := c.ReadAt(rctx, got, off)
		ret := h.now()
		cancel()
		if ctx.Err() != nil {
			return // the round ended: not the read's fault
		}
		r.record(off, got, err)
		recordBlocks(h, client, roVolume, off, got, err, call, ret)
		if err != nil {
			c.Close()
			c = nil
			client = h.client()
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (r *reader) setHistory(h *history) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hist = h
}

func (r *reader) history() *history {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hist
}

// recordBlocks records a read of p at off of volume as one read of each
// block (they all took place between call and ret).
func recordBlocks(h *history, client int, volume string, off int64, p []byte, err error, call, ret int64) {
	if err != nil {
		h.readFailed()
		return
	}
	for i := 0; i < len(p); i += blockSize {
		b := (off + int64(i)) / blockSize
		h.read(client, blockKey{volume, b}, version(b, p[i:i+blockSize]), call, ret)
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

// verifyRO reads all of roVolume through the export at addr and checks it
// (recording the reads in h); it returns the bytes checked.
func verifyRO(ctx context.Context, addr string, h *history) (int64, error) {
	c, err := dial(ctx, addr, roVolume)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	got := make([]byte, roChunk)
	client := h.client()
	for off := int64(0); off < roSize; off += roChunk {
		call := h.now()
		err := c.ReadAt(ctx, got, off)
		recordBlocks(h, client, roVolume, off, got, err, call, h.now())
		if err != nil {
			return 0, fmt.Errorf("reading %s at offset %d: %w", roVolume, off, err)
		}
		if !bytes.Equal(got, roContent(off, roChunk)) {
			return 0, fmt.Errorf("%w: %s: %d bytes at offset %d differ from the acknowledged content", errLostRO, roVolume, roChunk, off)
		}
	}
	return roSize, nil
}
