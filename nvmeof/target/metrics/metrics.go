// Package metrics exports a userspace NVMe/TCP target's counters
// (target.Target.Stats) as Prometheus metrics, read at each scrape, in a
// registry of their own: IO operations and bytes, errors, writes failed for
// lack of space and reservation conflicts per namespace, latency
// histograms and commands waiting for the device per namespace, operations,
// bytes and latency per namespace and host NQN, live connections, queues
// and controllers, and connections refused by reason. `nvstripe target serve --metrics-listen`
// serves them.
package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/nvstripe/nvstripe/internal/metricshttp"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// collector turns one Stats snapshot into metrics at each scrape.
type collector struct {
	t                                        *target.Target
	ops, bytes, errs, conflicts, noSpace     *prometheus.Desc
	connections, queues, controllers, refuse *prometheus.Desc
	latency, queued                          *prometheus.Desc
	hostOps, hostBytes, hostLatency          *prometheus.Desc
}

func newCollector(t *target.Target) *collector {
	const p = "nvstripe_target_"
	nsLabels := []string{"nqn", "nsid", "namespace"}
	withOp := append(nsLabels[:3:3], "op")
	withHost := append(nsLabels[:3:3], "host", "op")
	return &collector{t: t,
		ops:         prometheus.NewDesc(p+"io_ops_total", "IO commands run on the namespace (op: read, write, other), failed ones included.", withOp, nil),
		bytes:       prometheus.NewDesc(p+"io_bytes_total", "Bytes read from and written to the namespace by successful commands (op: read, write).", withOp, nil),
		errs:        prometheus.NewDesc(p+"io_errors_total", "IO commands on the namespace that failed (reservation conflicts aside).", nsLabels, nil),
		conflicts:   prometheus.NewDesc(p+"reservation_conflicts_total", "IO commands refused because another host holds the namespace's reservation.", nsLabels, nil),
		noSpace:     prometheus.NewDesc(p+"io_nospace_total", "IO commands that failed because the namespace's backing store is full (also in io_errors_total).", nsLabels, nil),
		connections: prometheus.NewDesc(p+"connections", "TCP connections open, with or without a queue.", nil, nil),
		queues:      prometheus.NewDesc(p+"queues", "Connections that completed a Connect (admin and IO queues).", nil, nil),
		controllers: prometheus.NewDesc(p+"controllers", "Controllers of IO subsystems (hosts' associations).", nil, nil),
		refuse:      prometheus.NewDesc(p+"refused_connections_total", "Connections or Connects refused, by reason.", []string{"reason"}, nil),
		latency:     prometheus.NewDesc(p+"io_latency_seconds", "Time from a command's data being complete to its device IO done, waiting for the device included (op: read, write, other).", withOp, nil),
		queued:      prometheus.NewDesc(p+"io_queued", "Commands waiting for the namespace's device (beyond --device-queue-depth running).", nsLabels, nil),
		hostOps:     prometheus.NewDesc(p+"host_io_ops_total", "IO commands of one host NQN on the namespace (host \"other\": hosts beyond the first 64).", withHost, nil),
		hostBytes:   prometheus.NewDesc(p+"host_io_bytes_total", "Bytes of one host NQN's successful commands on the namespace.", withHost, nil),
		hostLatency: prometheus.NewDesc(p+"host_io_latency_seconds", "io_latency_seconds of one host NQN's commands on the namespace.", withHost, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ops, c.bytes, c.errs, c.conflicts, c.noSpace, c.connections, c.queues, c.controllers, c.refuse,
		c.latency, c.queued, c.hostOps, c.hostBytes, c.hostLatency} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.t.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, n := range st.Namespaces {
		l := []string{n.NQN, strconv.FormatUint(uint64(n.NSID), 10), n.Name}
		counter(c.ops, n.ReadOps, append(l, "read")...)
		counter(c.ops, n.WriteOps, append(l, "write")...)
		counter(c.ops, n.OtherOps, append(l, "other")...)
		counter(c.bytes, n.ReadBytes, append(l, "read")...)
		counter(c.bytes, n.WriteBytes, append(l, "write")...)
		counter(c.errs, n.Errors, l...)
		counter(c.conflicts, n.ReservationConflicts, l...)
		counter(c.noSpace, n.NoSpace, l...)
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(n.Queued), l...)
		for op, o := range ops(n.IO) {
			ch <- histogram(c.latency, o.Latency, append(l, op)...)
		}
		for _, h := range n.Hosts {
			for op, o := range ops(h.IOStats) {
				hl := append(l[:3:3], h.HostNQN, op)
				counter(c.hostOps, o.Ops, hl...)
				counter(c.hostBytes, o.Bytes, hl...)
				ch <- histogram(c.hostLatency, o.Latency, hl...)
			}
		}
	}
	for _, r := range target.RefusalReasons() {
		counter(c.refuse, st.Refused[r], r)
	}
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	gauge(c.connections, st.Connections)
	gauge(c.queues, st.Queues)
	gauge(c.controllers, st.Controllers)
}

// ops names the op counters of s.
func ops(s target.IOStats) map[string]target.OpStats {
	return map[string]target.OpStats{"read": s.Read, "write": s.Write, "other": s.Other}
}

// histogram turns a target latency histogram into a Prometheus one.
func histogram(d *prometheus.Desc, h target.Histogram, labels ...string) prometheus.Metric {
	buckets := map[float64]uint64{}
	var cum uint64
	for i, b := range target.LatencyBounds() {
		cum += h.Counts[i]
		buckets[b.Seconds()] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count(), h.Sum.Seconds(), buckets, labels...)
}

// Registry returns a new registry holding t's metrics and the Go runtime
// and process collectors.
func Registry(t *target.Target) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(t), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Serve serves GET /metrics for t on addr until stop is called; it returns
// the bound address.
func Serve(addr string, t *target.Target) (bound string, stop func(), err error) {
	s, err := metricshttp.Serve(addr, Registry(t))
	if err != nil {
		return "", nil, err
	}
	return s.Addr(), func() { s.Close() }, nil
}
