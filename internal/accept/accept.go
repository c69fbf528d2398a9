// Package accept is the accept loop of nvstripe's servers (the NVMe/TCP
// target and the NBD server). It keeps accepting through temporary errors
// (out of file descriptors, out of buffers, a connection aborted before it
// was accepted), waiting 5 ms after the first and doubling up to 1 s as
// net/http does; it caps the connections handled at once, closing the ones
// beyond the cap as soon as they are accepted; and it runs each connection's
// handler on its own goroutine, returning only when all have ended. Counts
// are the servers' refusal counters by reason, as their stats report them.
package accept

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nvstripe/nvstripe/internal/retry"
)

// Backoff bounds: the wait after a first temporary accept error, doubled
// after each further one up to MaxBackoff; a successful accept resets it.
const (
	MinBackoff = 5 * time.Millisecond
	MaxBackoff = time.Second
)

var acceptBackoff = retry.Options{Initial: MinBackoff, Max: MaxBackoff}

// Reasons a server refuses a connection, as the servers' stats count them
// (one name each for every server). Serve refuses for the first two; the
// third is for a server that drops a connection which has not completed its
// handshake by the server's deadline.
const (
	RefusedMaxConnections = "max_connections"        // beyond Options.MaxConns
	RefusedPerIP          = "max_connections_per_ip" // beyond Options.MaxConnsPerIP from one address
	RefusedHandshake      = "handshake_timeout"      // no handshake within the server's deadline
)

// Options configure Serve. The zero value means no cap and no logging.
type Options struct {
	// MaxConns caps the connections being handled at once; one accepted
	// beyond the cap is closed at once and logged. 0: no cap.
	MaxConns int
	// MaxConnsPerIP caps the connections handled at once from one remote
	// IP address; one beyond is closed at once. The first refusal of an
	// address is logged, then none until all its connections have ended.
	// Peers without an IP address (unix sockets) are not capped by it.
	// 0: no cap.
	MaxConnsPerIP int
	// Name starts every log line (for example "nbd: 127.0.0.1:10809").
	Name string
	// Logf receives temporary errors and refused connections. Default: none.
	Logf func(format string, args ...any)
	// Refused, when set, is called for each connection closed for a cap
	// with the reason: RefusedMaxConnections or RefusedPerIP (for stats).
	Refused func(reason string)
}

// Serve accepts connections on ln and runs handle(nc) on a new goroutine for
// each; handle owns nc and must close it. It stops accepting when ctx ends
// (it then closes ln) or ln is closed, and returns nil; an accept error that
// is not temporary (see Temporary) ends it with that error. Either way it
// returns once every handler has returned.
func Serve(ctx context.Context, ln net.Listener, o Options, handle func(net.Conn)) error {
	defer context.AfterFunc(ctx, func() { ln.Close() })()
	var handlers sync.WaitGroup
	defer handlers.Wait()
	var open atomic.Int64
	var wait time.Duration
	var lastRefusal time.Time
	perIP := newIPCount(o.MaxConnsPerIP)
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			if !Temporary(err) {
				return err
			}
			wait = acceptBackoff.Grow(wait)
			o.logf("%s: accept: %v; retrying in %v", o.Name, err, wait)
			if retry.Sleep(ctx, wait) != nil {
				return nil
			}
			continue
		}
		wait = 0
		if o.MaxConns > 0 && open.Load() >= int64(o.MaxConns) {
			if now := time.Now(); now.Sub(lastRefusal) >= time.Second {
				lastRefusal = now
				o.logf("%s: refusing connection from %v: %d connections open, the most allowed", o.Name, nc.RemoteAddr(), o.MaxConns)
			}
			o.refused(RefusedMaxConnections) // counted before the peer sees the close
			nc.Close()
			continue
		}
		ip := remoteIP(nc)
		if !perIP.take(ip) {
			if perIP.firstRefusal(ip) {
				o.logf("%s: refusing connection from %v: %d connections open from %s, the most allowed (logged once)", o.Name, nc.RemoteAddr(), o.MaxConnsPerIP, ip)
			}
			o.refused(RefusedPerIP) // counted before the peer sees the close
			nc.Close()
			continue
		}
		open.Add(1)
		handlers.Go(func() {
			defer open.Add(-1)
			defer perIP.release(ip)
			handle(nc)
		})
	}
}

// ipCount counts the connections open from each remote IP address.
type ipCount struct {
	max     int // 0: no cap
	mu      sync.Mutex
	open    map[string]int
	refused map[string]bool // logged since its connections last all ended
}

func newIPCount(max int) *ipCount {
	return &ipCount{max: max, open: map[string]int{}, refused: map[string]bool{}}
}

// take counts a connection from ip; false when ip is at the cap. A peer
// without an IP address ("") is not counted.
func (c *ipCount) take(ip string) bool {
	if c.max <= 0 || ip == "" {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[ip] >= c.max {
		return false
	}
	c.open[ip]++
	return true
}

// firstRefusal says whether this is ip's first refusal since its
// connections last all ended.
func (c *ipCount) firstRefusal(ip string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := !c.refused[ip]
	c.refused[ip] = true
	return first
}

// release uncounts a connection from ip.
func (c *ipCount) release(ip string) {
	if c.max <= 0 || ip == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[ip]--; c.open[ip] <= 0 {
		delete(c.open, ip)
		delete(c.refused, ip)
	}
}

// remoteIP is the IP address of nc's peer; "" when it has none (a unix
// socket).
func remoteIP(nc net.Conn) string {
	switch a := nc.RemoteAddr().(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case *net.UDPAddr:
		return a.IP.String()
	}
	return ""
}

// temporaryErrnos are the accept errors that pass: the process or the
// system ran out of descriptors or memory, or a client gave up before its
// connection was accepted.
var temporaryErrnos = []syscall.Errno{
	syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
	syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN,
}

// Temporary says whether an accept error passes by itself, so that the
// loop should wait and accept again rather than end.
func Temporary(err error) bool {
	for _, e := range temporaryErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (o *Options) refused(reason string) {
	if o.Refused != nil {
		o.Refused(reason)
	}
}

func (o *Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}
