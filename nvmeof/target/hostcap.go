package target

import (
	"net"
	"sync"
)

// hostSlots counts the queues (connections past Connect) of each claimed
// host NQN, for Config.MaxConnectionsPerHost.
type hostSlots struct {
	mu      sync.Mutex
	open    map[string]int
	refused map[string]bool // logged since the host last ended a queue
}

// take counts a queue of nqn unless the host is at max (max <= 0: no
// cap). logRefusal is true on a refusal that should be logged: the first
// since the host last ended a queue.
func (h *hostSlots) take(nqn string, max int) (ok, logRefusal bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open == nil {
		h.open, h.refused = map[string]int{}, map[string]bool{}
	}
	if max > 0 && h.open[nqn] >= max {
		logRefusal = !h.refused[nqn]
		h.refused[nqn] = true
		return false, logRefusal
	}
	h.open[nqn]++
	return true, false
}

// release uncounts a queue of nqn.
func (h *hostSlots) release(nqn string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.refused, nqn)
	if h.open[nqn]--; h.open[nqn] <= 0 {
		delete(h.open, nqn)
	}
}

// takeHostSlot counts c as a queue of the host nqn claims, or refuses it
// (logged once per run of refusals) when the host has its most queues.
func (c *conn) takeHostSlot(nqn string) bool {
	ok, logRefusal := c.t.hosts.take(nqn, c.t.cfg.MaxConnectionsPerHost)
	if ok {
		c.slot = nqn
		return true
	}
	c.t.refuse(RefusedPerHost)
	if logRefusal {
		c.t.logf("nvmeof/target: %s: Connect of host %q refused: it has %d queues open, the most allowed (logged once until one ends)",
			c.nc.RemoteAddr(), nqn, c.t.cfg.MaxConnectionsPerHost)
	}
	return false
}

// releaseHostSlot uncounts c's queue, if counted.
func (c *conn) releaseHostSlot() {
	if c.slot != "" {
		c.t.hosts.release(c.slot)
		c.slot = ""
	}
}

// maxRefusalKeys bounds the refusals remembered; past it they are
// forgotten (and may be logged again).
const maxRefusalKeys = 4096

// refusals remembers which refusals were logged, so that a peer retrying
// (or claiming NQN after NQN) logs each once.
type refusals struct {
	mu   sync.Mutex
	seen map[string]bool
}

// first says whether key is refused for the first time.
func (r *refusals) first(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil || len(r.seen) >= maxRefusalKeys {
		r.seen = map[string]bool{}
	}
	if r.seen[key] {
		return false
	}
	r.seen[key] = true
	return true
}

// logRefusedHost logs, once per peer address and NQN, a Connect refused
// because the host is not allowed on the subsystem.
func (c *conn) logRefusedHost(subNQN, hostNQN string) {
	peer := remoteHost(c)
	if c.t.refused.first(peer + "\x00" + subNQN + "\x00" + hostNQN) {
		c.t.logf("nvmeof/target: %s: Connect of host %q to %s refused: host not allowed (logged once per address and host)",
			c.nc.RemoteAddr(), hostNQN, subNQN)
	}
}

// remoteHost is the IP address of c's peer.
func remoteHost(c *conn) string {
	addr := c.nc.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
