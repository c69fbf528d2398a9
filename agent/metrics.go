package agent

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/internal/metricshttp"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volclient"
	"github.com/nvstripe/nvstripe/volume"
)

// Metrics are the agent's Prometheus metrics, in a private registry (never
// the global one): per volume IO bytes, operations, errors and latency, per
// volume degraded stripe IO and hedged reads, per volume and namespace shard
// errors, mapping states and reports sent to etcd. Metrics of a volume are
// removed when it is unmapped.
type Metrics struct {
	reg      *prometheus.Registry
	bytes    *prometheus.CounterVec   // volume, op
	ops      *prometheus.CounterVec   // volume, op
	errs     *prometheus.CounterVec   // volume, op
	latency  *prometheus.HistogramVec // volume, op
	degraded *prometheus.CounterVec   // volume, op
	hedged   *prometheus.CounterVec   // volume
	nsErrs   *prometheus.CounterVec   // volume, namespace, kind
	badBlks  *prometheus.CounterVec   // volume, namespace, found_by, result
	reports  *prometheus.CounterVec   // namespace, result
	state    *prometheus.GaugeVec     // volume, state
	epoch    *prometheus.GaugeVec     // volume
	paths    *prometheus.GaugeVec     // namespace, path, state
	refused  *prometheus.CounterVec   // volume, reason
	// QoS (qos.go): requests delayed, their wait, the limits.
	qosDelayed *prometheus.CounterVec // volume, op
	qosWait    *prometheus.CounterVec // volume, op
	qosLimit   *prometheus.GaugeVec   // volume, limit
	// Blocks that read as corrupt until settled, as the owner knows them.
	unsettled *prometheus.GaugeVec // volume
}

// latencyBucketFactor is the growth of the native latency histogram's
// buckets: schema 3, 2^(1/8), each bucket 9% wider than the one before.
const latencyBucketFactor = 1.09

// mappingStates are the values of the state label, one-hot per volume.
func mappingStates() []string {
	return []string{api.StateStarting, api.StateServing, api.StateRetrying, api.StateFenced}
}

// NewMetrics builds the metrics in a new registry (with the Go runtime and
// process collectors).
func NewMetrics() *Metrics {
	const ns = "nvstripe_agent"
	vol := []string{"volume", "op"}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "io_bytes_total",
			Help: "Bytes read and written through the served volume (op: read, write)."}, vol),
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "io_ops_total",
			Help: "IO requests to the served volume (op: read, write, flush, trim, write_zeroes), failed ones included."}, vol),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "io_errors_total",
			Help: "IO requests to the served volume that failed."}, vol),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "io_latency_seconds",
			Help:    "Latency of IO requests to the served volume (QoS waits not included).",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18), // 50µs .. 6.5s, for scrapers without native histograms
			// Native buckets (protobuf exposition) 9% wide: p99 and p99.99
			// within a few percent (nvstripe top reads them).
			NativeHistogramBucketFactor: latencyBucketFactor, NativeHistogramMaxBucketNumber: 160,
			NativeHistogramMinResetDuration: time.Hour}, vol),
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "degraded_io_total",
			Help: "Stripe IOs that worked around missing shards (op: read, write, trim)."}, vol),
		hedged: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "hedged_reads_total",
			Help: "Degraded stripe reads that read a spare shard because their shard reads were slow or one failed (volume.Options.HedgeAfter)."}, []string{"volume"}),
		nsErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "namespace_errors_total",
			Help: "Shard IO errors per namespace (kind: io, corrupt)."}, []string{"volume", "namespace", "kind"}),
		badBlks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "checksum_bad_blocks_total",
			Help: "4 KiB blocks that did not match their checksum, per namespace (found_by: read, scrub, resync; result: healed, unhealed, torn, unsettled)."},
			[]string{"volume", "namespace", "found_by", "result"}),
		unsettled: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "unsettled_blocks",
			Help: "4 KiB blocks of the volume that read as corrupt until `nvstripe volume settle` (left unsettled by a crash mid-write and a namespace loss), as its owner knows them, from its record after a restart too."},
			[]string{"volume"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "namespace_failed_reports_total",
			Help: "Namespaces reported failed to etcd (result: ok, error)."}, []string{"namespace", "result"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "mapping_state",
			Help: "1 for the current state of each mapping (starting, serving, retrying, fenced)."}, []string{"volume", "state"}),
		epoch: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "owner_epoch",
			Help: "Epoch of the ownership lease held for the volume."}, []string{"volume"}),
		paths: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "path_ana_state",
			Help: "1 for the ANA state this node sees on each path of a namespace it uses (unknown: not connected)."},
			[]string{"namespace", "path", "state"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "nbd_refused_total",
			Help: "Connections refused by the volume's NBD listener (reason: max_connections, max_connections_per_ip, handshake_timeout)."},
			[]string{"volume", "reason"}),
		qosDelayed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "qos_delayed_total",
			Help: "IO requests that waited for their turn under the volume's QoS limits."}, vol),
		qosWait: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "qos_wait_seconds_total",
			Help: "Time IO requests waited for their turn under the volume's QoS limits."}, vol),
		qosLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "qos_limit",
			Help: "The volume's QoS limits applied by this mapping (limit: iops, read_iops, write_iops in requests a second; bps, read_bps, write_bps in bytes a second; 0: none)."},
			[]string{"volume", "limit"}),
	}
	m.reg.MustRegister(m.bytes, m.ops, m.errs, m.latency, m.degraded, m.hedged, m.nsErrs, m.badBlks, m.unsettled, m.reports, m.state, m.epoch, m.paths, m.refused,
		m.qosDelayed, m.qosWait, m.qosLimit,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the private registry (to add collectors or gather).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return metricshttp.Handler(m.reg)
}

// setState makes state the one current state of volume's mapping.
func (m *Metrics) setState(volume, state string) {
	for _, s := range mappingStates() {
		v := 0.0
		if s == state {
			v = 1
		}
		m.state.WithLabelValues(volume, s).Set(v)
	}
}

// setPathState makes p.State the one current state of its path.
func (m *Metrics) setPathState(p volclient.PathState) {
	for _, s := range []string{meta.ANAOptimized, meta.ANANonOptimized, meta.ANAInaccessible, meta.ANAPersistentLoss, meta.ANAChange, meta.ANAUnknown} {
		v := 0.0
		if s == p.State {
			v = 1
		}
		m.paths.WithLabelValues(p.Namespace, p.Addr, s).Set(v)
	}
}

// nbdRefused returns the nbd.Options.Refused hook that counts volume's
// refused NBD connections.
func (m *Metrics) nbdRefused(volume string) func(reason string) {
	return func(reason string) { m.refused.WithLabelValues(volume, reason).Inc() }
}

// forget removes every series of volume.
func (m *Metrics) forget(volume string) {
	l := prometheus.Labels{"volume": volume}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.bytes, m.ops, m.errs, m.latency, m.degraded, m.hedged, m.nsErrs, m.badBlks, m.unsettled, m.state, m.epoch, m.refused,
		m.qosDelayed, m.qosWait, m.qosLimit,
	} {
		v.DeletePartialMatch(l)
	}
}

// setUnsettled sets the unsettled_blocks of volume name to what its owner v lists
// (Volume.Unsettled: loaded from the volume's record at open).
func (m *Metrics) setUnsettled(name string, v *volume.Volume) {
	m.unsettled.WithLabelValues(name).Set(float64(len(v.Unsettled())))
}
