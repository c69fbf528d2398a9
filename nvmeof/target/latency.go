package target

import (
	"math/bits"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// latencyBuckets is the number of finite buckets of a latency histogram:
// upper bounds of 16 µs doubling up to about 4 s (LatencyBounds).
const latencyBuckets = 19

// LatencyBounds are the upper bounds of the buckets of every Histogram.
func LatencyBounds() []time.Duration {
	b := make([]time.Duration, latencyBuckets)
	for i := range b {
		b[i] = (16 * time.Microsecond) << i
	}
	return b
}

// Histogram counts commands by the time the target took for them, from
// the moment their data was complete until their device IO was done
// (time waiting for the device included, the reply not).
type Histogram struct {
	// Counts[i] are the commands that took at most LatencyBounds()[i] and
	// more than the bound before; the last count (one more than the
	// bounds) are the commands slower than every bound.
	Counts []uint64      `json:"counts"`
	Sum    time.Duration `json:"sum_ns"`
}

// Count is the number of commands in h.
func (h Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// latHist is a Histogram updated without locks.
type latHist struct {
	counts [latencyBuckets + 1]atomic.Uint64
	sum    atomic.Int64
}

func (h *latHist) observe(d time.Duration) {
	us := uint64(max(d.Microseconds(), 0))
	i := 0
	if us > 16 {
		i = min(bits.Len64(us-1)-4, latencyBuckets)
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

func (h *latHist) snapshot() Histogram {
	s := Histogram{Counts: make([]uint64, len(h.counts)), Sum: time.Duration(h.sum.Load())}
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	return s
}

// opIO counts one kind of command (read, write or other): commands,
// bytes of successful ones, and their latency.
type opIO struct {
	ops, bytes atomic.Uint64
	lat        latHist
}

// ioTimes are the per-op counters of a namespace, or of one host on it.
type ioTimes struct {
	read, write, other opIO
}

func (t *ioTimes) observe(op uint8, n uint64, st pdu.Status, d time.Duration) {
	o := &t.other
	switch op {
	case pdu.IORead:
		o = &t.read
	case pdu.IOWrite:
		o = &t.write
	}
	o.ops.Add(1)
	if st == 0 {
		o.bytes.Add(n)
	}
	o.lat.observe(d)
}

// maxHostsPerNamespace bounds the hosts a namespace counts apart; the IO
// of further host NQNs is counted under OtherHosts.
const maxHostsPerNamespace = 64

// OtherHosts is the host name under which a namespace counts the IO of the
// hosts beyond the first 64 it saw.
const OtherHosts = "other"

// hostIO holds a namespace's counters per host NQN.
type hostIO struct {
	mu    sync.Mutex
	hosts map[string]*ioTimes
}

// of returns the counters of hostNQN (OtherHosts once the namespace has
// counted maxHostsPerNamespace hosts).
func (h *hostIO) of(hostNQN string) *ioTimes {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hosts == nil {
		h.hosts = map[string]*ioTimes{}
	}
	if t := h.hosts[hostNQN]; t != nil {
		return t
	}
	if len(h.hosts) >= maxHostsPerNamespace {
		hostNQN = OtherHosts
		if t := h.hosts[hostNQN]; t != nil {
			return t
		}
	}
	t := new(ioTimes)
	h.hosts[hostNQN] = t
	return t
}

// OpStats are the counters of one kind of command.
type OpStats struct {
	Ops     uint64    `json:"ops"`
	Bytes   uint64    `json:"bytes"` // of successful commands
	Latency Histogram `json:"latency"`
}

func (o *opIO) stats() OpStats {
	return OpStats{Ops: o.ops.Load(), Bytes: o.bytes.Load(), Latency: o.lat.snapshot()}
}

// IOStats are read, write and other (flush, write zeroes, deallocate)
// commands of a namespace or of one host on it.
type IOStats struct {
	Read  OpStats `json:"read"`
	Write OpStats `json:"write"`
	Other OpStats `json:"other"`
}

func (t *ioTimes) stats() IOStats {
	return IOStats{Read: t.read.stats(), Write: t.write.stats(), Other: t.other.stats()}
}

// HostStats are one host's commands on a namespace.
type HostStats struct {
	HostNQN string `json:"host_nqn"` // OtherHosts: hosts beyond the first 64
	IOStats
}

func (h *hostIO) stats() []HostStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]HostStats, 0, len(h.hosts))
	for n, t := range h.hosts {
		out = append(out, HostStats{HostNQN: n, IOStats: t.stats()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].HostNQN < out[j].HostNQN })
	return out
}
