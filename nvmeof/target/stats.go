package target

import (
	"sort"
	"sync/atomic"

	"github.com/nvstripe/nvstripe/internal/accept"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// Reasons a connection or a host is refused, as Stats counts them.
const (
	RefusedMaxConnections = accept.RefusedMaxConnections // beyond Config.MaxConnections on its listener
	RefusedHostNotAllowed = "host_not_allowed"           // Connect from a host NQN the subsystem does not allow
	RefusedNoSubsystem    = "unknown_subsystem"          // Connect to a subsystem NQN the target does not serve
	RefusedAuth           = "auth_failed"                // DH-HMAC-CHAP failed
	RefusedAuthTimeout    = "auth_timeout"               // a keyed host's queue not authenticated within AuthTimeout of Connect
	RefusedHandshake      = accept.RefusedHandshake      // no Connect within HandshakeTimeout of accept
	RefusedPerIP          = accept.RefusedPerIP          // beyond Config.MaxConnectionsPerIP from one address
	RefusedPerHost        = "max_queues_per_host"        // beyond Config.MaxConnectionsPerHost queues of one host NQN
	RefusedPendingPerIP   = accept.RefusedPendingPerIP   // beyond Config.MaxPendingPerIP handshakes from one address
	RefusedPending        = accept.RefusedPending        // Config.MaxPendingConnections handshakes under way, its address among the busiest
	RefusedPendingEvicted = accept.RefusedPendingEvicted // a handshake closed to make room for one from a quieter address
	RefusedTLS            = "tls_failed"                 // TLS handshake failed (unknown identity, wrong key), or a Connect outside its TLS identity
	RefusedTLSRequired    = "tls_required"               // a plaintext connection to a target with TLS required
)

// RefusalReasons lists every reason Stats.Refused counts, in a fixed order.
func RefusalReasons() []string {
	return []string{RefusedMaxConnections, RefusedPerIP, RefusedPendingPerIP, RefusedPending, RefusedPendingEvicted, RefusedHostNotAllowed, RefusedPerHost, RefusedNoSubsystem, RefusedAuth, RefusedAuthTimeout, RefusedHandshake, RefusedTLS, RefusedTLSRequired}
}

// nsCounters are a namespace's IO counters since the target was built.
type nsCounters struct {
	readOps, readBytes, writeOps, writeBytes, otherOps, errors, conflicts atomic.Uint64
	noSpace                                                               atomic.Uint64
}

// count records one IO command's outcome on the namespace.
func (n *nsCounters) count(op uint8, bytes uint64, st pdu.Status) {
	switch op {
	case pdu.IORead:
		n.readOps.Add(1)
		if st == 0 {
			n.readBytes.Add(bytes)
		}
	case pdu.IOWrite:
		n.writeOps.Add(1)
		if st == 0 {
			n.writeBytes.Add(bytes)
		}
	default:
		n.otherOps.Add(1)
	}
	switch {
	case st == 0:
	case st.Code() == pdu.SCReservationConflict:
		n.conflicts.Add(1)
	case st.Code() == pdu.SCCapacityExceeded:
		n.noSpace.Add(1)
		n.errors.Add(1)
	default:
		n.errors.Add(1)
	}
}

// NamespaceStats are one namespace's counters.
type NamespaceStats struct {
	NQN        string `json:"nqn"`
	NSID       uint32 `json:"nsid"`
	Name       string `json:"name"`
	ReadOps    uint64 `json:"read_ops"`    // Read commands, failed ones included
	ReadBytes  uint64 `json:"read_bytes"`  // bytes of successful reads
	WriteOps   uint64 `json:"write_ops"`   // Write commands, failed ones included
	WriteBytes uint64 `json:"write_bytes"` // bytes of successful writes
	OtherOps   uint64 `json:"other_ops"`   // Flush, Write Zeroes, Dataset Management
	Errors     uint64 `json:"errors"`      // commands that failed, reservation conflicts aside
	// ReservationConflicts are commands refused because another host
	// holds the namespace's reservation (a fenced writer).
	ReservationConflicts uint64 `json:"reservation_conflicts"`
	// NoSpace are commands that failed because the namespace's backing
	// store is full (answered Capacity Exceeded; counted in Errors too).
	NoSpace uint64 `json:"no_space"`
	// Queued are the commands waiting for the namespace's device now
	// (Config.DeviceQueueDepth run at once).
	Queued int `json:"queued"`
	// IO are the same commands by op with their latency; Hosts the same
	// per host NQN, by NQN.
	IO    IOStats     `json:"io"`
	Hosts []HostStats `json:"hosts"`
}

// Stats are a target's counters and gauges at one moment.
type Stats struct {
	Namespaces  []NamespaceStats  `json:"namespaces"`  // by subsystem NQN, then NSID
	Connections int               `json:"connections"` // TCP connections open, queues or not yet
	Queues      int               `json:"queues"`      // connections that completed a Connect (admin and IO queues)
	Controllers int               `json:"controllers"` // controllers of IO subsystems (discovery ones aside)
	Refused     map[string]uint64 `json:"refused"`     // connections refused, by reason (RefusalReasons)
}

// refuse counts one refusal for reason.
func (t *Target) refuse(reason string) {
	t.refusedBy.Add(reason)
}

// Stats returns the target's counters since New and its live connections.
func (t *Target) Stats() Stats {
	st := Stats{Refused: t.refusedBy.Snapshot()}
	nqns := make([]string, 0, len(t.subs))
	for n := range t.subs {
		nqns = append(nqns, n)
	}
	sort.Strings(nqns)
	for _, n := range nqns {
		s := t.subs[n]
		for _, id := range s.nsids {
			ns := s.ns[id]
			c := &ns.counters
			st.Namespaces = append(st.Namespaces, NamespaceStats{NQN: n, NSID: id, Name: ns.cfg.Name,
				ReadOps: c.readOps.Load(), ReadBytes: c.readBytes.Load(), WriteOps: c.writeOps.Load(),
				WriteBytes: c.writeBytes.Load(), OtherOps: c.otherOps.Load(), Errors: c.errors.Load(),
				ReservationConflicts: c.conflicts.Load(), NoSpace: c.noSpace.Load(),
				Queued: ns.sched.waiting(), IO: ns.times.stats(), Hosts: ns.hosts.stats()})
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.listeners {
		st.Connections += len(l.conns)
	}
	for _, c := range t.ctrls {
		if !c.disc {
			st.Controllers++
		}
	}
	st.Queues = int(t.queues.Load())
	return st
}
