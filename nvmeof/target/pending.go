package target

import (
	"net"
)

// admitPending counts nc among the handshakes under way on l
// (Config.MaxPendingConnections, MaxPendingPerIP), or refuses it: closed
// at once, counted by reason and logged once per address and reason.
func (t *Target) admitPending(l *listener, nc net.Conn) bool {
	reason, evicted := l.pending.Add(nc)
	if evicted {
		t.refuse(RefusedPendingEvicted)
	}
	if reason == "" {
		return true
	}
	t.refuse(reason) // counted before the peer sees the close
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		host = nc.RemoteAddr().String()
	}
	if t.refused.first(host + "\x00" + reason) {
		t.logf("nvmeof/target: listener %d: refusing connection from %v: %s (%d handshakes under way from one address, %d in all, the most allowed; logged once per address)",
			l.idx, nc.RemoteAddr(), reason, t.cfg.MaxPendingPerIP, t.cfg.MaxPendingConnections)
	}
	nc.Close()
	return false
}

// handshakeDone uncounts c from its listener's handshakes under way: its
// queue is open (Connect done and, for a host with keys, authenticated),
// or it ended. Calling it again does nothing.
func (c *conn) handshakeDone() { c.l.pending.Done(c.raw) }
