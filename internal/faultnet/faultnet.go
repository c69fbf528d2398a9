// Package faultnet is a TCP proxy on 127.0.0.1 that injects network faults
// between a client and a server in tests and fault campaigns: it can stall
// every connection (bytes stop moving both ways, sockets stay open, as when
// the server process is stopped with SIGSTOP), resume them, reset them, and
// stall once the client has sent given bytes (to stop a multi-step
// operation half way).
//
// Partition, stall and reset also come per source: PartitionFrom,
// StallFrom and ResetFrom act only on the connections whose client address
// is a given IP, so that one client of a server is cut off while the
// others still reach it (on Linux all of 127/8 is local: clients that bind
// 127.0.0.2, 127.0.0.3, ... tell themselves apart on one host).
package faultnet

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Proxy forwards connections from its address to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cond    *sync.Cond
	stalled bool
	dropped bool          // partitioned: connections are closed at once
	delay   time.Duration // added before forwarding each chunk
	trigger []byte        // stall after forwarding client bytes containing it
	// srcStalled and srcDropped are the per-source stalls and partitions;
	// cut counts the connections a per-source partition closed.
	srcStalled, srcDropped map[netip.Addr]bool
	cut                    map[netip.Addr]int
	// conns are both ends of every forwarded connection, by the client's
	// address.
	conns  map[net.Conn]netip.Addr
	closed bool
	wg     sync.WaitGroup
}

// New listens on 127.0.0.1:0 and forwards every connection to target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]netip.Addr{},
		srcStalled: map[netip.Addr]bool{}, srcDropped: map[netip.Addr]bool{}, cut: map[netip.Addr]int{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the proxy's address (127.0.0.1:PORT).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Stall stops moving bytes on every connection, new ones included; the
// sockets stay open.
func (p *Proxy) Stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
}

// StallAfter stalls the proxy as it forwards client bytes that contain b
// (within one read): the server gets the request that holds b, but the
// client never hears back.
func (p *Proxy) StallAfter(b []byte) {
	p.mu.Lock()
	p.trigger = bytes.Clone(b)
	p.mu.Unlock()
}

// Stalled says whether the proxy is stalled.
func (p *Proxy) Stalled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stalled
}

// Resume moves bytes again, on every connection.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.stalled = false
	clear(p.srcStalled)
	p.cond.Broadcast()
	p.mu.Unlock()
}

// StallFrom stalls the connections from client address src only, new
// ones included (Resume or Heal end it).
func (p *Proxy) StallFrom(src netip.Addr) {
	p.mu.Lock()
	p.srcStalled[src.Unmap()] = true
	p.mu.Unlock()
}

// Reset closes every open connection (new ones are still accepted).
func (p *Proxy) Reset() {
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// ResetFrom closes the open connections from client address src.
func (p *Proxy) ResetFrom(src netip.Addr) {
	p.mu.Lock()
	p.resetFrom(src.Unmap())
	p.mu.Unlock()
}

// resetFrom closes the connections from src and returns how many (both
// ends of each are in conns); p.mu is held.
func (p *Proxy) resetFrom(src netip.Addr) int {
	n := 0
	for c, from := range p.conns {
		if from == src {
			c.Close()
			n++
		}
	}
	return n / 2
}

// Partition closes every open connection and every new one at once (the
// client sees its connection reset or refused) until Heal.
func (p *Proxy) Partition() {
	p.mu.Lock()
	p.dropped = true
	p.mu.Unlock()
	p.Reset()
}

// PartitionFrom partitions the connections from client address src only:
// they are closed, and new ones from it at once, until Heal; other clients
// go on.
func (p *Proxy) PartitionFrom(src netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	src = src.Unmap()
	p.srcDropped[src] = true
	p.cut[src] += p.resetFrom(src)
}

// Cut is how many connections from src its partitions (PartitionFrom)
// closed, open ones and new ones: whether the client felt them.
func (p *Proxy) Cut(src netip.Addr) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut[src.Unmap()]
}

// Delay holds each chunk d before forwarding it, both ways (0: none).
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Heal undoes every fault: it resumes, ends a partition, drops the delay
// and forgets a StallAfter trigger.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.dropped, p.delay, p.trigger = false, 0, nil
	clear(p.srcDropped)
	p.mu.Unlock()
	p.Resume()
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.stalled = false
	p.cond.Broadcast()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	src := sourceOf(c)
	if !p.waitMoving(src) || p.partitioned(src) {
		c.Close()
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, s, src) {
		return
	}
	var both sync.WaitGroup
	both.Go(func() { p.pipe(s, c, src, true) })
	both.Go(func() { p.pipe(c, s, src, false) })
	both.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// sourceOf is the client address of c (the zero Addr if it has none).
func sourceOf(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// track registers both ends of a connection from src; false (both closed)
// when the proxy closed or src is partitioned.
func (p *Proxy) track(c, s net.Conn, src netip.Addr) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.dropped || p.srcDropped[src] {
		if !p.closed && !p.dropped {
			p.cut[src]++
		}
		c.Close()
		s.Close()
		return false
	}
	p.conns[c], p.conns[s] = src, src
	return true
}

// partitioned says whether a new connection from src is to be closed at
// once (counting it as cut when its source is partitioned).
func (p *Proxy) partitioned(src netip.Addr) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.dropped && p.srcDropped[src] {
		p.cut[src]++
	}
	return p.dropped || p.srcDropped[src]
}

// chunkDelay is the delay in force.
func (p *Proxy) chunkDelay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

// waitMoving blocks while the connections from src are stalled; false once
// the proxy is closed.
func (p *Proxy) waitMoving(src netip.Addr) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for (p.stalled || p.srcStalled[src]) && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

// pipe copies from src to dst (a connection from client address from),
// holding each chunk while stalled; fromClient chunks are checked against
// the StallAfter trigger.
func (p *Proxy) pipe(dst, src net.Conn, from netip.Addr, fromClient bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := p.chunkDelay(); d > 0 {
				time.Sleep(d)
			}
			if !p.waitMoving(from) {
				return
			}
			// A chunk that holds the trigger stalls the proxy before it
			// goes on (it has passed waitMoving already), so the reply it
			// asks for cannot overtake the stall.
			if fromClient {
				p.checkTrigger(buf[:n])
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // either end closing closes both
		}
	}
}

func (p *Proxy) checkTrigger(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.trigger != nil && bytes.Contains(b, p.trigger) {
		p.trigger = nil
		p.stalled = true
	}
}
