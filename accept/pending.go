package accept

import (
	"container/list"
	"net"
	"sync"
)

// Reasons a server drops a connection still in its handshake, for the
// servers' stats beside the refusal reasons above.
const (
	RefusedHandshakesPerIP  = "handshakes_per_ip" // beyond Pending's share of one address
	RefusedHandshakeEvicted = "handshake_evicted" // the oldest handshake, ended to make room
)

// Pending is a server's budget for connections still in their handshake,
// whose clients have proved nothing yet: at most maxPerIP of them from one
// remote IP address and at most max in all. A connection beyond its
// address's share is refused; one that finds the total full ends the oldest
// handshake (closing its socket) and takes its place. A client's handshake
// takes milliseconds, a stalled one the server's whole handshake deadline,
// so the oldest is nearly always a staller: a flood from a few addresses
// holds at most maxPerIP places each, a flood from many keeps turning over,
// and neither keeps a client from another address out for the deadline.
// Peers without an IP address (unix sockets) count only in the total.
//
// It is safe for concurrent use.
type Pending struct {
	maxPerIP, max int // 0: no cap

	mu    sync.Mutex
	perIP map[string]int // REQUIRES: mu held
	order list.List      // *Handshake, oldest first; REQUIRES: mu held
}

// Handshake is one connection registered with Pending until Done.
type Handshake struct {
	p       *Pending
	ip      string
	nc      net.Conn
	elem    *list.Element // nil once done or evicted; REQUIRES: p.mu held
	evicted bool          // REQUIRES: p.mu held
}

// NewPending returns a budget of maxPerIP handshakes per address and total
// in all; 0 or less means no cap.
func NewPending(maxPerIP, total int) *Pending {
	return &Pending{maxPerIP: max(maxPerIP, 0), max: max(total, 0), perIP: map[string]int{}}
}

// Begin registers nc as in its handshake. When nc's address already has
// maxPerIP handshakes it returns nil and RefusedHandshakesPerIP, leaving nc
// to the caller to close. When the total is full it first evicts the oldest
// handshake: that connection's socket is closed, and its Done reports it.
func (p *Pending) Begin(nc net.Conn) (*Handshake, string) {
	ip := remoteIP(nc)
	p.mu.Lock()
	if p.maxPerIP > 0 && ip != "" && p.perIP[ip] >= p.maxPerIP {
		p.mu.Unlock()
		return nil, RefusedHandshakesPerIP
	}
	var victim *Handshake
	if p.max > 0 && p.order.Len() >= p.max {
		victim = p.order.Front().Value.(*Handshake)
		victim.evicted = true
		p.removeLocked(victim)
	}
	h := &Handshake{p: p, ip: ip, nc: nc}
	h.elem = p.order.PushBack(h)
	if ip != "" {
		p.perIP[ip]++
	}
	p.mu.Unlock()
	if victim != nil {
		victim.nc.Close()
	}
	return h, ""
}

// Done ends h's registration: its handshake completed or failed, or its
// connection ended. It says whether h had been evicted (its socket closed
// to make room). Calling it again does nothing more.
func (h *Handshake) Done() (evicted bool) {
	p := h.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if h.elem != nil {
		p.removeLocked(h)
	}
	return h.evicted
}

// Len returns the handshakes registered now.
func (p *Pending) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.order.Len()
}

// removeLocked unregisters h. REQUIRES: p.mu held, h registered.
func (p *Pending) removeLocked(h *Handshake) {
	p.order.Remove(h.elem)
	h.elem = nil
	if h.ip == "" {
		return
	}
	if p.perIP[h.ip]--; p.perIP[h.ip] <= 0 {
		delete(p.perIP, h.ip)
	}
}
