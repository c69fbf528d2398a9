package nbd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/nbd/proto"
)

// Reasons Stats.Refused counts for connections dropped in transmission: a
// request whose header and payload did not arrive in time (RequestTimeout,
// MinPayloadRate), a WRITE that waited RequestTimeout for payload memory
// (MaxPayloadMemory), and replies the client did not take in time.
const (
	DroppedRequestTimeout = "request_timeout"
	DroppedPayloadMemory  = "payload_memory"
	DroppedReplyTimeout   = "reply_timeout"
)

// A client may keep a connection idle between requests for as long as it
// likes (the kernel's nbd driver does), but once a request's first byte has
// arrived the rest must follow: the header within RequestTimeout, and a
// WRITE's payload within RequestTimeout plus its length at MinPayloadRate.
// A client that trickles its bytes is dropped; the payload memory it held
// goes back. And the WRITE payloads held at once, across connections, are
// bounded by MaxPayloadMemory: a WRITE that finds no room waits (with its
// connection's reading) up to RequestTimeout, then the connection is
// dropped. So slow senders on many connections cannot hold memory without
// bound, nor for long.
//
// The same holds for READ data, the other way: the buffer of a READ counts
// in MaxPayloadMemory from before the device fills it until its reply is
// written (a READ that finds no room for RequestTimeout is answered
// ENOMEM), and replies must leave within RequestTimeout plus their length
// at MinPayloadRate: a client that sends READs and stops reading the
// replies is dropped, and the memory goes back.

// errPayloadMemory ends a connection whose WRITE found no payload memory.
var errPayloadMemory = errors.New("no payload memory (MaxPayloadMemory) within the request timeout")

// memBudget bounds the bytes of request data held at once by a server's
// connections: WRITE payloads from before they are read until their write
// is done, READ data from before the device fills it until the reply is
// written. It is safe for concurrent use.
type memBudget struct {
	max int64 // 0: no bound

	mu      sync.Mutex
	used    int64         // REQUIRES: mu held
	peak    int64         // highest used since NewServer; REQUIRES: mu held
	freed   chan struct{} // closed and replaced by a release when waited on; REQUIRES: mu held
	waiting bool          // someone waits on freed; REQUIRES: mu held
}

func newMemBudget(max int64) *memBudget {
	return &memBudget{max: max, freed: make(chan struct{})}
}

// acquire takes n bytes, waiting up to wait for room; errPayloadMemory when
// none came, the context's error or errClientGone when those end first.
func (b *memBudget) acquire(ctx context.Context, gone <-chan struct{}, n int64, wait time.Duration) error {
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		if b.max <= 0 || b.used+n <= b.max {
			b.used += n
			b.peak = max(b.peak, b.used)
			b.mu.Unlock()
			return nil
		}
		freed := b.freed
		b.waiting = true
		b.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-freed:
		case <-timeout:
			return errPayloadMemory
		case <-ctx.Done():
			return ctx.Err()
		case <-gone:
			return errClientGone
		}
	}
}

// release gives back n bytes and wakes the waiters, if any (so that the
// common case allocates nothing).
func (b *memBudget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.waiting {
		close(b.freed)
		b.freed, b.waiting = make(chan struct{}), false
	}
	b.mu.Unlock()
}

// usage returns the bytes held now and the most held at once.
func (b *memBudget) usage() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// getPayload returns a buffer for a WRITE payload of n bytes once the
// server's payload memory has room for it.
func (c *conn) getPayload(ctx context.Context, n int) (*[]byte, error) {
	wait := c.s.opts.RequestTimeout
	if wait < 0 {
		wait = DefaultRequestTimeout
	}
	if err := c.s.payloadMem.acquire(ctx, c.ioCtx.Done(), int64(n), wait); err != nil {
		if errors.Is(err, errPayloadMemory) {
			c.s.drop(DroppedPayloadMemory, "nbd: dropping %v: a WRITE of %d bytes waited %v for payload memory", c.nc.RemoteAddr(), n, wait)
			err = fmt.Errorf("%w: %w", err, errDropped)
		}
		return nil, err
	}
	return c.s.bufs.get(n), nil
}

// getReadBuf returns a buffer for a READ of n bytes once the server's
// payload memory has room for it, or the error to answer the READ with.
func (c *conn) getReadBuf(n int) (*[]byte, error) {
	wait := c.s.opts.RequestTimeout
	if wait < 0 {
		wait = DefaultRequestTimeout
	}
	if err := c.s.payloadMem.acquire(c.ioCtx, c.ioCtx.Done(), int64(n), wait); err != nil {
		if errors.Is(err, errPayloadMemory) {
			return nil, reqErr(proto.ENOMEM, "no memory for a READ of %d bytes within %v", n, wait)
		}
		return nil, err
	}
	return c.s.bufs.get(n), nil
}

// putBuf returns a WRITE payload or READ data buffer and its memory.
func (c *conn) putBuf(p *[]byte) {
	n := len(*p)
	c.s.bufs.put(p)
	c.s.payloadMem.release(int64(n))
}

// expectBytes bounds the wait for the next n bytes of a request: when
// fewer are buffered, the socket's read deadline is set to RequestTimeout
// plus n at MinPayloadRate from now. The deadline is left in place
// afterwards (reads of bytes already buffered do not look at it, and a
// wait for more sets a new one) until idleWait clears it: half the
// deadline changes of setting and clearing one around every read.
// REQUIRES: the reader's turn.
func (c *conn) expectBytes(ctx context.Context, n int) {
	if c.br.Buffered() >= n || c.s.opts.RequestTimeout < 0 {
		return
	}
	c.setReadDeadline(ctx, time.Now().Add(c.s.opts.RequestTimeout+c.atMinRate(n)))
	c.deadline = true
}

// idleWait waits, with no deadline, for the first byte of the next
// request. REQUIRES: the reader's turn.
func (c *conn) idleWait(ctx context.Context) error {
	if c.br.Buffered() == 0 && c.deadline {
		c.setReadDeadline(ctx, time.Time{})
		c.deadline = false
	}
	_, err := c.br.Peek(1)
	return err
}

// setReadDeadline sets the socket's read deadline, unless a shutdown or the
// export's removal has stopped reading (by a deadline in the past), which
// must stay: it checks after setting, so either order of the two is safe.
func (c *conn) setReadDeadline(ctx context.Context, t time.Time) {
	c.nc.SetReadDeadline(t)
	if ctx.Err() != nil || c.exp.ctx.Err() != nil {
		c.nc.SetReadDeadline(time.Unix(1, 0))
	}
}

// requestTimedOut counts and describes a request that did not arrive in
// time (err is the read's timeout), or returns err unchanged when the
// timeout is a shutdown's.
func (c *conn) requestTimedOut(ctx context.Context, what string, n int, err error) error {
	if !timedOut(err) || ctx.Err() != nil || c.exp.ctx.Err() != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	c.s.drop(DroppedRequestTimeout, "nbd: dropping %v: %s of %d bytes not received in time", c.nc.RemoteAddr(), what, n)
	return fmt.Errorf("%s of %d bytes not received within %v plus its length at %d bytes/s: %w: %w",
		what, n, c.s.opts.RequestTimeout, c.s.opts.MinPayloadRate, err, errDropped)
}

// atMinRate is how long n bytes take at MinPayloadRate (0 without one).
func (c *conn) atMinRate(n int) time.Duration {
	r := c.s.opts.MinPayloadRate
	if r <= 0 {
		return 0
	}
	return time.Duration(float64(n) / float64(r) * float64(time.Second))
}

// replyDeadline makes sure the socket's write deadline leaves the next n
// reply bytes at least RequestTimeout/2 plus n at MinPayloadRate, setting
// it to RequestTimeout plus that when it leaves less: under steady traffic
// the deadline changes at most every RequestTimeout/2, for a clock read
// per batch. Only the writer calls it.
func (c *conn) replyDeadline(n int) {
	if c.s.opts.RequestTimeout < 0 {
		return
	}
	now, need := time.Now(), c.atMinRate(n)
	if c.tx.until.After(now.Add(c.s.opts.RequestTimeout/2 + need)) {
		return
	}
	c.tx.until = now.Add(c.s.opts.RequestTimeout + need)
	c.nc.SetWriteDeadline(c.tx.until)
}

// replyTimedOut counts a connection whose replies missed their deadline
// (err is the failed write's error).
func (c *conn) replyTimedOut(err error) {
	if timedOut(err) {
		c.s.drop(DroppedReplyTimeout, "nbd: dropping %v: its replies were not taken within %v plus their length at %d bytes/s", c.nc.RemoteAddr(), c.s.opts.RequestTimeout, c.s.opts.MinPayloadRate)
	}
}
