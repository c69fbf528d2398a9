package nbd

import (
	"errors"
	"time"

	"github.com/nvstripe/nvstripe/internal/accept"
)

// Stats are a server's counters and gauges at one moment.
type Stats struct {
	// Connections are the connections being served: accepted ones, in
	// the handshake or in transmission, and kernel sockets.
	Connections int `json:"connections"`
	// Refused counts the connections refused since NewServer, by reason
	// (every one of RefusalReasons, zeroes included).
	Refused map[string]uint64 `json:"refused"`
	// PayloadBytes are the bytes of request data held now (WRITE
	// payloads being received or written, READ data being read or sent),
	// PayloadBytesPeak the most held at once since NewServer; both stay
	// within Options.MaxPayloadMemory.
	PayloadBytes     int64 `json:"payload_bytes"`
	PayloadBytesPeak int64 `json:"payload_bytes_peak"`
}

// RefusalReasons lists every reason Stats.Refused counts, in a fixed order:
// beyond Options.MaxConnections, beyond Options.MaxConnectionsPerIP, no
// handshake within Options.HandshakeTimeout, beyond
// Options.MaxHandshakesPerIP, the oldest handshake ended for a newer
// connection at Options.MaxHandshakes, and, in transmission, a request not
// received within Options.RequestTimeout (and MinPayloadRate), a WRITE
// without payload memory (Options.MaxPayloadMemory) for as long, and
// replies not taken in time.
func RefusalReasons() []string {
	return []string{accept.RefusedMaxConnections, accept.RefusedPerIP, accept.RefusedHandshake,
		accept.RefusedPendingPerIP, accept.RefusedPending, accept.RefusedPendingEvicted, DroppedRequestTimeout, DroppedPayloadMemory,
		DroppedReplyTimeout}
}

// refuse counts one refusal for reason.
func (s *Server) refuse(reason string) {
	s.refusedBy.Add(reason)
	if s.opts.Refused != nil {
		s.opts.Refused(reason)
	}
}

// errDropped marks the error of a connection dropped for a budget: it was
// counted and logged (at most once a second) when dropped, so Serve does not
// log it again.
var errDropped = errors.New("nbd: connection dropped")

// drop counts a connection dropped for reason and logs the line, unless a
// line was logged less than a second ago: a flood does not flood the log.
func (s *Server) drop(reason, format string, args ...any) {
	s.refuse(reason)
	now := time.Now().UnixNano()
	last := s.lastDropLog.Load()
	if now-last >= int64(time.Second) && s.lastDropLog.CompareAndSwap(last, now) {
		s.opts.Logf(format+" (at most one such line a second; Stats counts them all)", args...)
	}
}

// Stats returns the server's counters since NewServer and its live
// connections.
func (s *Server) Stats() Stats {
	st := Stats{Connections: int(s.open.Load()), Refused: s.refusedBy.Snapshot()}
	st.PayloadBytes, st.PayloadBytesPeak = s.payloadMem.usage()
	return st
}
