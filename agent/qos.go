package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/qos"
)

// How a mapping applies its volume's QoS (meta.QoS in the volume record).
//
// Every mapping has a qos.Limiter, in front of what its frontend serves
// (limitedDev): the limits of the record read when the volume is opened,
// then those of every change the mapping's watch of the record delivers
// (resize.go follows the record for resizes and QoS alike), applied to
// requests already waiting too. Only the frontend's IO goes through it:
// the shard moves and scrubs the controller gives the mapping work on the
// volume below, under the controller's pacer. Waits end with the request's
// context. The io_latency metrics are of the volume below, without the
// QoS wait, which has its own (qos_delayed_total, qos_wait_seconds_total).

// limitsOf is the qos.Limits of a volume record's QoS.
func limitsOf(q meta.QoS) qos.Limits {
	return qos.Limits{IOPS: q.IOPS, ReadIOPS: q.ReadIOPS, WriteIOPS: q.WriteIOPS,
		BPS: q.BPS, ReadBPS: q.ReadBPS, WriteBPS: q.WriteBPS, Burst: q.Burst()}
}

// limitedDev is what the mapping's frontend serves: dev behind the
// mapping's limiter, waits counted in the metrics.
func (mp *mapping) limitedDev(dev blockdev.Device) blockdev.Device {
	return qos.NewDevice(dev, mp.limiter, mp.a.metrics.qosWaited(mp.name))
}

// setQoS applies q to the mapping from now on (nothing when unchanged).
func (mp *mapping) setQoS(q meta.QoS) {
	lim, cur := limitsOf(q), mp.limiter.Limits()
	if cur == lim || (!cur.Limited() && !lim.Limited()) {
		return
	}
	mp.limiter.Set(lim)
	mp.a.metrics.setQoS(mp.name, q)
	mp.a.logf("%s: QoS limits now %s", mp.name, q)
}

// qosWaited returns the qos.Device hook that counts volume's requests
// delayed by its QoS limits and their wait.
func (m *Metrics) qosWaited(volume string) func(op blockdev.Op, d time.Duration) {
	var delayed, secs [blockdev.NumOps]prometheus.Counter
	for op := range blockdev.NumOps {
		delayed[op] = m.qosDelayed.WithLabelValues(volume, op.String())
		secs[op] = m.qosWait.WithLabelValues(volume, op.String())
	}
	return func(op blockdev.Op, d time.Duration) {
		delayed[op].Inc()
		secs[op].Add(d.Seconds())
	}
}

// setQoS shows volume's limits (0: none) in the qos_limit gauge.
func (m *Metrics) setQoS(volume string, q meta.QoS) {
	for _, l := range []struct {
		name string
		v    int64
	}{{"iops", q.IOPS}, {"read_iops", q.ReadIOPS}, {"write_iops", q.WriteIOPS},
		{"bps", q.BPS}, {"read_bps", q.ReadBPS}, {"write_bps", q.WriteBPS}} {
		m.qosLimit.WithLabelValues(volume, l.name).Set(float64(l.v))
	}
}
