package agent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/placement"
	"github.com/nvstripe/nvstripe/volume"
)

// ReportOptions say when the agent reports a namespace failed in etcd.
//
// Only media errors count: a namespace that answered with data it could not
// read (volume Corruption events, class blockdev.ErrCorrupt). Unreachable
// namespaces (ShardError events, class ErrUnavailable) are only counted in
// the metrics and in List: whether a host is down is decided by membership
// and the controller's grace period, not by one node's view of the network.
type ReportOptions struct {
	// FailNamespaceAfter is how many media errors of one namespace, seen by
	// this agent, mark it failed in etcd (its shards are then rebuilt
	// elsewhere by the controller). Default 1: media errors reported by
	// owners mark a namespace failed at once (docs/architecture.md,
	// failure handling). Negative: never.
	FailNamespaceAfter int
	// Timeout bounds one etcd update. Default 5s; negative is refused.
	Timeout time.Duration
}

func (o *ReportOptions) ensureDefaults() {
	if o.FailNamespaceAfter == 0 {
		o.FailNamespaceAfter = 1
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
}

// namespaceStates is what the reporter needs of meta.Store.
type namespaceStates interface {
	Namespace(ctx context.Context, id string) (*meta.NamespaceRecord, error)
	SetNamespaceState(ctx context.Context, id string, state placement.State) error
}

var _ namespaceStates = (*meta.Store)(nil)

// reporter marks namespaces failed in etcd, from its own goroutine so that
// volume callbacks (which run on the IO path) never wait for etcd.
type reporter struct {
	st   namespaceStates
	o    ReportOptions
	m    *Metrics
	logf func(string, ...any)
	ch   chan string // namespace ids with a new media error

	// recheck: how long after reading a reported namespace's state the
	// reporter reads it again on its next errors (it may have been put
	// back in service since).
	recheck time.Duration

	mu       sync.Mutex
	counts   map[string]int       // media errors since the namespace was last reported
	reported map[string]bool      // reported failed by this agent at some point
	checked  map[string]time.Time // when a reported namespace's state was last read
	dropped  atomic.Int64
}

// recheckReported is reporter.recheck: a namespace that keeps failing
// costs one etcd read per interval, and one put back in service by an
// operator is reported again within it.
const recheckReported = 10 * time.Second

func newReporter(st namespaceStates, o ReportOptions, m *Metrics, logf func(string, ...any)) *reporter {
	o.ensureDefaults()
	return &reporter{st: st, o: o, m: m, logf: logf, ch: make(chan string, 256), recheck: recheckReported,
		counts: map[string]int{}, reported: map[string]bool{}, checked: map[string]time.Time{}}
}

// mediaError records a media error of namespace ns without blocking.
func (r *reporter) mediaError(ns string) {
	select {
	case r.ch <- ns:
	default:
		r.dropped.Add(1) // the next error of ns gets through
	}
}

// run processes media errors until ctx ends.
func (r *reporter) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ns := <-r.ch:
			if r.due(ns) {
				r.report(ctx, ns)
			}
		}
	}
}

// due counts an error of ns and says whether ns should be reported now: it
// has had FailNamespaceAfter errors since it was last reported and, if it
// was reported before, its state was not read within recheck (an operator
// may have put it back in service; it is then reported again).
func (r *reporter) due(ns string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[ns]++
	if r.o.FailNamespaceAfter <= 0 || r.counts[ns] < r.o.FailNamespaceAfter {
		return false
	}
	return !r.reported[ns] || time.Since(r.checked[ns]) >= r.recheck
}

// report marks ns failed unless it is already out of service. A failed
// attempt is retried on the namespace's next error.
func (r *reporter) report(ctx context.Context, ns string) {
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	marked, err := r.markFailed(ctx, ns)
	result := "ok"
	if err != nil {
		result = "error"
		r.logf("reporting namespace %s failed: %v", ns, err)
	} else {
		r.mu.Lock()
		n := r.counts[ns]
		r.reported[ns] = true
		r.checked[ns] = time.Now()
		r.counts[ns] = 0
		r.mu.Unlock()
		if marked {
			r.logf("namespace %s reported failed after %d media errors", ns, n)
		}
	}
	r.m.reports.WithLabelValues(ns, result).Inc()
}

// markFailed marks ns failed in etcd and reports whether it did (not when
// it is out of service already).
func (r *reporter) markFailed(ctx context.Context, ns string) (bool, error) {
	rec, err := r.st.Namespace(ctx, ns)
	if err != nil {
		return false, err
	}
	st, err := placement.ParseState(rec.State)
	if err != nil {
		return false, fmt.Errorf("namespace %s: %w", ns, err)
	}
	if st == placement.StateOut || st == placement.StateFailed {
		return false, nil // already being rebuilt elsewhere
	}
	return true, r.st.SetNamespaceState(ctx, ns, placement.StateFailed)
}

// wasReported says whether ns was reported failed by this agent.
func (r *reporter) wasReported(ns string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reported[ns]
}

// volEvents collects one mapping's volume events: counters for List, metrics,
// and media errors for the reporter.
type volEvents struct {
	volume   string
	m        *Metrics
	rep      *reporter
	degraded atomic.Int64
	degOps   map[string]prometheus.Counter // read, write, trim
	hedged   prometheus.Counter
	warn     func(volume string, attrs ...any)
	logf     func(format string, args ...any) // nil: unsettled blocks and deferred resyncs are not logged

	mu       sync.Mutex
	nsErrs   map[string]int64
	csumErrs map[string]int64 // checksum mismatches, by namespace
}

func newVolEvents(volumeName string, m *Metrics, rep *reporter, warn func(string, ...any)) *volEvents {
	e := &volEvents{volume: volumeName, m: m, rep: rep, warn: warn, degOps: map[string]prometheus.Counter{}, nsErrs: map[string]int64{},
		csumErrs: map[string]int64{}}
	for _, op := range []string{"read", "write", "trim"} {
		e.degOps[op] = m.degraded.WithLabelValues(volumeName, op)
	}
	e.hedged = m.hedged.WithLabelValues(volumeName)
	return e
}

// listener returns the volume EventListener feeding e.
func (e *volEvents) listener() volume.EventListener {
	return volume.EventListener{
		Degraded: func(d volume.DegradedInfo) {
			e.degraded.Add(1)
			c, ok := e.degOps[d.Op]
			if !ok {
				c = e.m.degraded.WithLabelValues(e.volume, d.Op)
			}
			c.Inc()
			e.warn(e.volume, "volume", e.volume, "op", d.Op, "segment", d.Segment, "stripe", d.Stripe, "missing", d.Missing)
		},
		Hedged: func(volume.HedgeInfo) { e.hedged.Inc() },
		ShardError: func(s volume.ShardInfo) {
			e.nsError(s.NS, "io")
			if s.Slot < 0 && e.logf != nil { // no slot: Recover deferred the segment's resync
				e.logf("%s: segment %d stays dirty after the unclean stop: %v; the next open of %s tries to settle it again",
					e.volume, s.Segment, s.Err, e.volume)
			}
		},
		Corruption: func(s volume.ShardInfo) {
			e.nsError(s.NS, "corrupt")
			e.rep.mediaError(s.NS)
		},
		Checksum: func(c volume.ChecksumInfo) {
			e.badBlocks(c)
			// Blocks a resync took as they are were torn by a crash or a
			// fenced owner, not bad media, and so may be those left bad in
			// a segment whose resync is still pending: counted apart,
			// never reported.
			if c.Blocks <= c.Torn+c.Unsettled {
				e.nsError(c.NS, "torn")
				return
			}
			// One bad block is healed in place; a namespace that keeps
			// returning them is reported as a media error.
			e.nsError(c.NS, "checksum")
			if e.checksumError(c.NS) >= checksumMediaError {
				e.rep.mediaError(c.NS)
			}
		},
		Unsettled: func(b volume.UnsettledBlock) {
			if e.logf != nil {
				e.logf("%s", b.Message(e.volume))
			}
		},
	}
}

// badBlocks counts the bad blocks of c by namespace, finder and result.
func (e *volEvents) badBlocks(c volume.ChecksumInfo) {
	unhealed := c.Blocks - c.Healed - c.Torn - c.Unsettled
	for result, n := range map[string]int{"healed": c.Healed, "unhealed": unhealed, "torn": c.Torn, "unsettled": c.Unsettled} {
		if n > 0 {
			e.m.badBlks.WithLabelValues(e.volume, c.NS, c.FoundBy, result).Add(float64(n))
		}
	}
}

// checksumMediaError is the number of checksum mismatches of one namespace
// (torn blocks and IO errors not counted: an outage or a crash makes those)
// from which each further mismatch reports it as failing media (the
// reporter rate-limits repeats).
const checksumMediaError = 8

// nsError counts an error of namespace ns and returns its count so far.
func (e *volEvents) nsError(ns, kind string) int64 {
	e.mu.Lock()
	e.nsErrs[ns]++
	n := e.nsErrs[ns]
	e.mu.Unlock()
	e.m.nsErrs.WithLabelValues(e.volume, ns, kind).Inc()
	return n
}

// checksumError counts a checksum mismatch of namespace ns and returns the
// count so far.
func (e *volEvents) checksumError(ns string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.csumErrs[ns]++
	return e.csumErrs[ns]
}

// namespaceErrors returns a copy of the per-namespace error counts and the
// namespaces among them that were reported failed.
func (e *volEvents) namespaceErrors() (map[string]int64, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.nsErrs) == 0 {
		return nil, nil
	}
	out := make(map[string]int64, len(e.nsErrs))
	var failed []string
	for ns, n := range e.nsErrs {
		out[ns] = n
		if e.rep.wasReported(ns) {
			failed = append(failed, ns)
		}
	}
	slices.Sort(failed)
	return out, failed
}
