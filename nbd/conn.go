package nbd

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvstripe/nvstripe/internal/accept"
	"github.com/nvstripe/nvstripe/internal/rawsock"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// Transmission limits.
const (
	// readBufSize is the read buffer: enough for hundreds of small requests
	// per system call, small because a buffer fill also takes in the start
	// of a large WRITE's payload, which is then copied once more (the rest
	// of the payload is read straight into its own buffer).
	readBufSize = 16 << 10
)

// conn is one client connection. During the handshake the serving
// goroutine owns br and out; during transmission br belongs to the worker
// holding rmu (the reader's turn) and the socket's write side to the worker
// writing for the sender (tx).
type conn struct {
	s   *Server
	nc  net.Conn
	br  *bufio.Reader
	raw *rawsock.Conn // nc's raw reads and writes; nil: use nc itself
	tls *tls.Conn     // over nc after STARTTLS: every read and write
	out []byte        // handshake replies, flushed per option

	// Set when transmission starts, read-only afterwards.
	exp        *export
	structured bool
	metaID     uint32
	tflags     proto.TransmissionFlags
	ioCtx      context.Context    // device IO; cancelled after the grace period or when the client is gone
	cancelIO   context.CancelFunc // cancels ioCtx

	budget  budget
	workers sync.WaitGroup // worker goroutines (see workers.go)
	waiting atomic.Int32   // workers waiting for the reader's turn
	disc    atomic.Bool    // the client sent DISC: requests read before it run
	tx      sender         // the socket's write side during transmission

	rmu      sync.Mutex // the reader's turn: its holder reads the next request
	stopped  bool       // reading has ended; REQUIRES: rmu held
	deadline bool       // a request's read deadline is set (payload.go); REQUIRES: rmu held
	readErr  error      // why; REQUIRES: rmu held to write, workers done to read
	nworkers int        // REQUIRES: rmu held
}

func newConn(s *Server, nc net.Conn) *conn {
	tuneSocket(nc, s.opts)
	c := &conn{s: s, nc: nc, raw: rawsock.New(nc)}
	c.tx.room.L = &c.tx.mu
	var r io.Reader = nc
	if c.raw != nil {
		r = c.raw
	}
	c.br = bufio.NewReaderSize(r, readBufSize)
	return c
}

// tuneSocket sizes the send buffer of a TCP connection from a loopback
// client (Options.LoopbackSendBuffer). Failing to is harmless: the kernel's
// default stays.
func tuneSocket(nc net.Conn, o Options) {
	tc, ok := nc.(*net.TCPConn)
	if !ok || o.LoopbackSendBuffer <= 0 {
		return
	}
	if a, ok := tc.RemoteAddr().(*net.TCPAddr); ok && a.IP.IsLoopback() {
		_ = tc.SetWriteBuffer(o.LoopbackSendBuffer)
	}
}

// writer is where replies go: the TLS session once there is one.
func (c *conn) writer() io.Writer {
	if c.tls != nil {
		return c.tls
	}
	return c.nc
}

// flushOut writes the pending handshake bytes.
func (c *conn) flushOut() error {
	if len(c.out) == 0 {
		return nil
	}
	_, err := c.writer().Write(c.out)
	c.out = c.out[:0]
	if err != nil {
		return fmt.Errorf("write handshake reply: %w", err)
	}
	return nil
}

// serve runs the handshake (unless st is given: a kernel socket starts in
// transmission) and then transmission. When ctx ends, reads stop at once
// and, after ShutdownGrace, device IO is cancelled and the socket closed so
// that nothing waits on a client that does not read.
func (c *conn) serve(ctx context.Context, st *session) error {
	ioCtx, ioCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer ioCancel()
	c.ioCtx, c.cancelIO = ioCtx, ioCancel
	if st == nil {
		deadline := time.Now().Add(c.s.opts.HandshakeTimeout)
		c.nc.SetReadDeadline(deadline)
		c.nc.SetWriteDeadline(deadline)
	}
	defer c.watchShutdown(ctx, ioCancel)()
	if st == nil {
		var err error
		if st, err = c.handshake(ctx); err != nil || st == nil {
			return err
		}
		c.nc.SetReadDeadline(time.Time{})
		c.nc.SetWriteDeadline(time.Time{})
		if ctx.Err() != nil {
			return nil
		}
	}
	return c.transmit(ctx, st)
}

// handshake runs the negotiation within the server's handshake budget
// (Options.MaxHandshakesPerIP, MaxHandshakes). A nil session with a nil
// error is a clean end.
func (c *conn) handshake(ctx context.Context) (*session, error) {
	refused, evicted := c.s.pending.Add(c.nc)
	if refused != "" {
		c.s.drop(refused, "nbd: refusing connection from %v: %s (%d handshakes per address, %d in all)", c.nc.RemoteAddr(), refused, c.s.opts.MaxHandshakesPerIP, c.s.opts.MaxHandshakes)
		return nil, fmt.Errorf("handshake budget full (%s): %w", refused, errDropped)
	}
	if evicted {
		c.s.drop(accept.RefusedPendingEvicted, "nbd: ended the oldest handshake of the busiest address for %v (%d pending, the most allowed)", c.nc.RemoteAddr(), c.s.opts.MaxHandshakes)
	}
	st, err := c.negotiate()
	if !c.s.pending.Done(c.nc) {
		return nil, fmt.Errorf("handshake ended for a connection from a quieter address (%d pending, the most allowed): %w", c.s.opts.MaxHandshakes, errDropped)
	}
	if err == nil {
		return st, nil
	}
	if timedOut(err) && ctx.Err() == nil {
		c.s.refuse(accept.RefusedHandshake)
		return nil, fmt.Errorf("no NBD handshake within %v of accept; dropped: %w", c.s.opts.HandshakeTimeout, err)
	}
	return nil, c.cleanEnd(ctx, "handshake", err)
}

// watchShutdown arranges that when ctx ends, reads stop at once and, after
// ShutdownGrace, device IO is cancelled and the socket closed. The returned
// function ends the watch and waits for it.
func (c *conn) watchShutdown(ctx context.Context, ioCancel context.CancelFunc) func() {
	done, fin := make(chan struct{}), make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fin)
		c.nc.SetReadDeadline(time.Unix(1, 0))
		t := time.NewTimer(c.s.opts.ShutdownGrace)
		defer t.Stop()
		select {
		case <-t.C:
			ioCancel()
			c.nc.Close()
		case <-done:
		}
	})
	return func() {
		close(done)
		if !stop() {
			<-fin
		}
	}
}

// timedOut says whether err is a socket deadline passing.
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// cleanEnd turns the errors of an orderly end into nil.
func (c *conn) cleanEnd(ctx context.Context, phase string, err error) error {
	switch {
	case err == nil, errors.Is(err, errAbort), ctx.Err() != nil:
		return nil
	case errors.Is(err, io.EOF), errors.Is(err, errClientGone):
		return nil // the client went away
	}
	return fmt.Errorf("nbd %s: %w", phase, err)
}

// transmit serves requests until DISC, EOF, a protocol error or shutdown,
// then waits for the requests in progress and their replies.
func (c *conn) transmit(ctx context.Context, st *session) error {
	e := st.exp
	if !c.s.attach(e) {
		return nil
	}
	defer e.conns.Done()
	defer context.AfterFunc(e.ctx, func() { c.nc.SetReadDeadline(time.Unix(1, 0)) })()
	if e.ctx.Err() != nil {
		return nil
	}
	c.exp, c.structured, c.metaID = e, st.structured, st.metaID()
	c.tflags = e.flags(st.structured)
	c.budget = newBudget(c.s.opts.MaxInFlight, c.s.opts.MaxInFlightBytes)
	c.nworkers = 1
	c.workers.Add(1)
	c.work(ctx)
	c.workers.Wait()
	if e.ctx.Err() != nil {
		return nil
	}
	return c.cleanEnd(ctx, "transmission", c.readErr)
}

// readRequest reads the next request (and a WRITE's payload) once the
// in-flight budget has room for it. It returns errDisc at DISC, and a nil
// job when it answered the request itself. It waits for a request's first
// byte for as long as the client likes; the rest must follow in time
// (payload.go).
func (c *conn) readRequest(ctx context.Context) (*job, error) {
	var hdr [proto.RequestSize]byte
	if err := c.idleWait(ctx); err != nil {
		return nil, fmt.Errorf("read request: %w", err)
	}
	c.expectBytes(ctx, len(hdr))
	if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
		return nil, c.requestTimedOut(ctx, "request header", len(hdr), err)
	}
	req, err := proto.ParseRequest(hdr[:])
	if err != nil {
		return nil, err
	}
	if req.Type == proto.CmdDisc {
		return nil, errDisc
	}
	cost := c.cost(req)
	if err := c.budget.acquire(ctx, c.ioCtx.Done(), cost); err != nil {
		return nil, err
	}
	var payload *[]byte
	if req.Type == proto.CmdWrite {
		payload, err = c.readPayload(ctx, req, cost)
		if err != nil {
			c.budget.release(cost)
			return nil, err
		}
		if payload == nil {
			return nil, nil // answered already; the reply released the budget
		}
	}
	return &job{req: req, payload: payload, cost: cost}, nil
}

// cost is what a request holds of the in-flight byte budget.
func (c *conn) cost(req proto.Request) int {
	if (req.Type == proto.CmdRead || req.Type == proto.CmdWrite) && int64(req.Length) <= int64(c.s.opts.MaxRequest) {
		return int(req.Length)
	}
	return 0
}

// readPayload reads a WRITE payload into memory of the server's payload
// budget. An over-long payload up to the size the protocol says not to
// treat as an attack is read, dropped and answered with EINVAL (payload
// nil); a longer one ends the connection.
func (c *conn) readPayload(ctx context.Context, req proto.Request, cost int) (*[]byte, error) {
	n := int64(req.Length)
	if n > int64(c.s.opts.MaxRequest) {
		if n > int64(max(c.s.opts.MaxRequest, proto.DefaultMaxPayload)) {
			return nil, fmt.Errorf("WRITE payload of %d bytes over the maximum %d", n, c.s.opts.MaxRequest)
		}
		c.expectBytes(ctx, int(n))
		if _, err := io.CopyN(io.Discard, c.br, n); err != nil {
			return nil, c.requestTimedOut(ctx, "discarded WRITE payload", int(n), err)
		}
		r := c.newReply(req, 0)
		c.fail(r, reqErr(proto.EINVAL, "WRITE of %d bytes over the maximum payload %d", n, c.s.opts.MaxRequest))
		c.send(r)
		return nil, nil
	}
	p, err := c.getPayload(ctx, cost)
	if err != nil {
		return nil, err
	}
	c.expectBytes(ctx, cost)
	if _, err := io.ReadFull(c.br, *p); err != nil {
		c.putBuf(p)
		return nil, c.requestTimedOut(ctx, "WRITE payload", cost, err)
	}
	return p, nil
}

// budget bounds the requests and payload bytes in flight. One goroutine
// (the reader) acquires; any goroutine releases.
type budget struct {
	mu              sync.Mutex
	count, bytes    int // in use; REQUIRES: mu held
	maxCount, maxBy int
	wake            chan struct{}
}

func newBudget(maxCount, maxBytes int) budget {
	return budget{maxCount: maxCount, maxBy: maxBytes, wake: make(chan struct{}, 1)}
}

// acquire waits until a request of n bytes fits (a request alone always
// fits), ctx ends or gone closes.
func (b *budget) acquire(ctx context.Context, gone <-chan struct{}, n int) error {
	for {
		b.mu.Lock()
		if b.count < b.maxCount && (b.bytes+n <= b.maxBy || b.bytes == 0) {
			b.count++
			b.bytes += n
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock()
		select {
		case <-b.wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-gone:
			return errClientGone
		}
	}
}

func (b *budget) release(n int) {
	b.mu.Lock()
	b.count--
	b.bytes -= n
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}
