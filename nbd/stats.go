package nbd

import (
	"sync/atomic"

	"github.com/nvstripe/nvstripe/accept"
)

// Stats are a server's counters and gauges at one moment.
type Stats struct {
	// Connections are the connections being served: accepted ones, in
	// the handshake or in transmission, and kernel sockets.
	Connections int `json:"connections"`
	// Refused counts the connections refused since NewServer, by reason
	// (every one of RefusalReasons, zeroes included).
	Refused map[string]uint64 `json:"refused"`
}

// RefusalReasons lists every reason Stats.Refused counts, in a fixed order:
// beyond Options.MaxConnections, beyond Options.MaxConnectionsPerIP, and no
// handshake within Options.HandshakeTimeout.
func RefusalReasons() []string {
	return []string{accept.RefusedMaxConnections, accept.RefusedPerIP, accept.RefusedHandshake}
}

func newRefusalCounts() map[string]*atomic.Uint64 {
	m := map[string]*atomic.Uint64{}
	for _, r := range RefusalReasons() {
		m[r] = new(atomic.Uint64)
	}
	return m
}

// refuse counts one refusal for reason.
func (s *Server) refuse(reason string) {
	if c := s.refusedBy[reason]; c != nil {
		c.Add(1)
	}
	if s.opts.Refused != nil {
		s.opts.Refused(reason)
	}
}

// Stats returns the server's counters since NewServer and its live
// connections.
func (s *Server) Stats() Stats {
	st := Stats{Connections: int(s.open.Load()), Refused: map[string]uint64{}}
	for r, c := range s.refusedBy {
		st.Refused[r] = c.Load()
	}
	return st
}
