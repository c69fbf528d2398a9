package nbd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/accept"
)

// Server serves exports over NBD. Create it with NewServer; it is safe for
// concurrent use.
type Server struct {
	opts      Options
	bufs      bufPool
	replyPool sync.Pool // *reply
	// ctx is cancelled by Close; every connection and Serve loop stops then.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts the running Serve and ServeConn calls.
	wg sync.WaitGroup
	// open counts the connections being served; refusedBy the connections
	// refused, by reason (RefusalReasons).
	open      atomic.Int64
	refusedBy accept.Counts
	// pending is the handshake budget; lastDropLog the time (Unix ns) of
	// the last line logged for a dropped connection.
	pending     *accept.Pending
	lastDropLog atomic.Int64
	// payloadMem bounds the request data held (MaxPayloadMemory).
	payloadMem *memBudget

	mu      sync.Mutex
	closed  bool               // REQUIRES: mu held
	exports map[string]*export // REQUIRES: mu held
	defName string             // REQUIRES: mu held
}

// NewServer validates opts (after filling in defaults) and returns a server
// offering opts.Exports.
func NewServer(opts Options) (*Server, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.TLS = startTLSConfig(opts.TLS)
	s := &Server{opts: opts, exports: make(map[string]*export), defName: opts.DefaultExport, refusedBy: accept.NewCounts(RefusalReasons()),
		pending: accept.NewPending(opts.MaxHandshakes, opts.MaxHandshakesPerIP), payloadMem: newMemBudget(int64(max(opts.MaxPayloadMemory, 0)))}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for name, e := range opts.Exports {
		s.exports[name] = newExport(name, e, &s.bufs)
	}
	return s, nil
}

// AddExport offers e under name to new connections. It fails when the name
// is taken or the server is closed. When the server has no default export,
// the first export added becomes the default.
func (s *Server) AddExport(name string, e Export) error {
	if err := e.validate(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrServerClosed
	}
	if _, ok := s.exports[name]; ok {
		return fmt.Errorf("nbd: export %q already exists: %w", name, blockdev.ErrInvalid)
	}
	s.exports[name] = newExport(name, e, &s.bufs)
	if s.defName == "" {
		s.defName = name
	}
	return nil
}

// RemoveExport stops offering the export and ends its connections the way
// Close does (in-flight requests finish first). It returns when they have
// all ended, after which the caller may close the device.
func (s *Server) RemoveExport(name string) error {
	s.mu.Lock()
	e, ok := s.exports[name]
	if ok {
		delete(s.exports, name)
		if s.defName == name {
			s.defName = ""
		}
		e.closeLocked()
	}
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("nbd: no export %q: %w", name, blockdev.ErrInvalid)
	}
	e.conns.Wait()
	return nil
}

// lookup returns the export for a client-supplied name ("" = default).
func (s *Server) lookup(name string) *export {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "" {
		name = s.defName
	}
	return s.exports[name]
}

// exportList returns the exports sorted by name.
func (s *Server) exportList() []*export {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := make([]*export, 0, len(s.exports))
	for _, e := range s.exports {
		list = append(list, e)
	}
	slices.SortFunc(list, func(a, b *export) int { return strings.Compare(a.name, b.name) })
	return list
}

// attach registers a connection entering transmission on e; false when e
// was removed meanwhile.
func (s *Server) attach(e *export) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.gone {
		return false
	}
	e.conns.Add(1)
	return true
}

// start registers a running Serve or connection that owns c and returns
// its context, which ends with ctx or when the server closes, and the
// function to defer: it ends the context, closes c and unregisters. On a
// closed server it closes c and returns ErrServerClosed.
func (s *Server) start(ctx context.Context, c io.Closer) (context.Context, func(), error) {
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if closed {
		c.Close()
		return nil, nil, ErrServerClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
		c.Close()
		s.wg.Done()
	}, nil
}

// Serve accepts connections on l and serves each in its own goroutine until
// ctx is cancelled or Close is called; then it closes l, waits for its
// connections to end (see Close) and returns nil. Temporary accept errors
// (out of file descriptors...) are waited out (package accept); connections
// beyond MaxConnections, or beyond MaxConnectionsPerIP from one address, are
// closed at once (logged, and counted in Stats). Any other accept error is
// returned once the connections have ended.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	ctx, done, err := s.start(ctx, l)
	if err != nil {
		return err
	}
	defer done()
	o := accept.Options{MaxConns: max(s.opts.MaxConnections, 0), MaxConnsPerIP: max(s.opts.MaxConnectionsPerIP, 0),
		Name: fmt.Sprintf("nbd: %v", l.Addr()), Logf: s.opts.Logf, Refused: s.refuse}
	err = accept.Serve(ctx, l, o, func(nc net.Conn) {
		if err := s.ServeConn(ctx, nc); err != nil && !errors.Is(err, errDropped) {
			s.opts.Logf("nbd: connection from %v: %v", nc.RemoteAddr(), err)
		}
	})
	if err != nil {
		return fmt.Errorf("nbd: accept on %v: %w", l.Addr(), err)
	}
	return nil
}

// ServeConn runs the NBD protocol on one connection until the client
// disconnects, the export is removed, ctx is cancelled or Close is called;
// it closes nc before returning. A clean end (NBD_CMD_DISC, NBD_OPT_ABORT,
// EOF between requests, shutdown) returns nil; a protocol violation or a
// socket error returns an error describing it.
func (s *Server) ServeConn(ctx context.Context, nc net.Conn) error {
	return s.serveConn(ctx, nc, nil)
}

// serveKernelConn serves a socket whose other end belongs to the kernel's
// nbd driver: transmission from the first byte, simple replies only.
func (s *Server) serveKernelConn(ctx context.Context, nc net.Conn, e *export) error {
	return s.serveConn(ctx, nc, &session{exp: e})
}

// serveConn serves nc from the handshake (sess nil) or in transmission on
// sess's export.
func (s *Server) serveConn(ctx context.Context, nc net.Conn, sess *session) error {
	ctx, done, err := s.start(ctx, nc)
	if err != nil {
		return err
	}
	defer done()
	s.open.Add(1)
	defer s.open.Add(-1)
	return newConn(s, nc).serve(ctx, sess)
}

// Close stops every Serve loop and connection: no new requests are read,
// requests in progress finish and their replies are sent (for up to
// ShutdownGrace), then sockets close. It returns when all of it is done.
// Close does not close the exported devices. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for _, e := range s.exports {
			e.closeLocked()
		}
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}
