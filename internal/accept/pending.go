package accept

import (
	"net"
	"sync"
)

// Reasons a server refuses or drops a connection that has not finished its
// handshake (Pending), as the servers' stats count them.
const (
	RefusedPendingPerIP   = "max_pending_per_ip" // its address already has Pending's most handshakes under way
	RefusedPending        = "max_pending"        // every handshake slot taken, its address among the busiest
	RefusedPendingEvicted = "pending_evicted"    // dropped to make room: the oldest handshake of the busiest address
)

// Pending counts the connections of a server that have not finished their
// handshake (for the NVMe/TCP target: ICReq, Connect and, for a host with
// keys, authentication), per remote IP address and in all, so that a flood
// of stalled connections from a few addresses cannot hold every
// connection slot: an address gets at most maxPerIP handshakes under way;
// when max are under way, a new one from an address with fewer than the
// busiest address evicts (closes) the busiest address's oldest, and one
// from an address with as many is refused. Size max well below the
// server's connection cap, so that handshakes alone never fill it. Safe
// for concurrent use.
type Pending struct {
	max, maxPerIP int // 0 or less: no cap
	mu            sync.Mutex
	byIP          map[string][]pendingConn // oldest first
	n             int
	seq           uint64 // counts Adds: the age of a handshake
}

// pendingConn is a counted handshake and when it was counted.
type pendingConn struct {
	nc  net.Conn
	seq uint64
}

// NewPending returns a Pending with the given caps (0 or less: none).
func NewPending(max, maxPerIP int) *Pending {
	return &Pending{max: max, maxPerIP: maxPerIP, byIP: map[string][]pendingConn{}}
}

// Add counts nc as a handshake under way. It returns "" when nc is
// counted, else the reason it is refused (RefusedPendingPerIP or
// RefusedPending; nc is not counted and the caller closes it). evicted is true when another
// connection was closed to make room for nc (RefusedPendingEvicted).
func (p *Pending) Add(nc net.Conn) (refused string, evicted bool) {
	ip := remoteIP(nc)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.maxPerIP > 0 && len(p.byIP[ip]) >= p.maxPerIP {
		return RefusedPendingPerIP, false
	}
	if p.max > 0 && p.n >= p.max {
		busiest := p.busiestLocked()
		if len(p.byIP[ip]) >= len(p.byIP[busiest]) {
			return RefusedPending, false
		}
		old := p.byIP[busiest][0].nc
		p.removeLocked(busiest, old)
		old.Close()
		evicted = true
	}
	p.seq++
	p.byIP[ip] = append(p.byIP[ip], pendingConn{nc, p.seq})
	p.n++
	return "", evicted
}

// Done uncounts nc: its handshake finished, or it ended. It reports
// whether nc was still counted: false when it was evicted (or never
// counted, or Done already ran), so a server can tell an eviction from
// a client's own failure. Calling it again does nothing.
func (p *Pending) Done(nc net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.removeLocked(remoteIP(nc), nc)
}

// busiestLocked is the address with the most handshakes under way; of
// addresses with as many, the one with the oldest handshake.
// REQUIRES: p.mu held.
func (p *Pending) busiestLocked() string {
	var best string
	for ip, cs := range p.byIP {
		bs := p.byIP[best]
		if len(cs) > len(bs) || len(cs) == len(bs) && len(cs) > 0 && cs[0].seq < bs[0].seq {
			best = ip
		}
	}
	return best
}

// removeLocked uncounts nc of ip and reports whether it was counted.
// REQUIRES: p.mu held.
func (p *Pending) removeLocked(ip string, nc net.Conn) (found bool) {
	cs := p.byIP[ip]
	for i, c := range cs {
		if c.nc == nc {
			cs = append(cs[:i:i], cs[i+1:]...)
			p.n--
			found = true
			break
		}
	}
	if len(cs) == 0 {
		delete(p.byIP, ip)
	} else {
		p.byIP[ip] = cs
	}
	return found
}
