// Package top reads the per-volume telemetry of agents and foreground maps
// from their Prometheus endpoints and turns two readings into rates, for
// `nvstripe top`: per volume the read and write requests and bytes a
// second, the latency percentiles (p50, p99, p99.99) of the requests
// between the readings, and the requests the volume's QoS limits delayed
// and how long they waited.
//
// Latency percentiles come from the native buckets of
// nvstripe_agent_io_latency_seconds (9% wide: the protobuf exposition,
// which Scrape asks for), or from its classic buckets (factor 2) when an
// endpoint offers no native ones; a percentile is the upper bound of the
// bucket it falls in. Scrape is safe for concurrent use; the rest are
// functions of values.
package top

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// The metrics read (package agent's).
const (
	metricOps      = "nvstripe_agent_io_ops_total"
	metricBytes    = "nvstripe_agent_io_bytes_total"
	metricLatency  = "nvstripe_agent_io_latency_seconds"
	metricDelayed  = "nvstripe_agent_qos_delayed_total"
	metricQoSWait  = "nvstripe_agent_qos_wait_seconds_total"
	metricQoSLimit = "nvstripe_agent_qos_limit"
)

// accept asks for the protobuf exposition (native histogram buckets),
// else text.
const accept = `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3`

// Reading is the cumulative counters of every volume at one moment.
type Reading struct {
	At      time.Time
	Volumes map[string]*Counters
}

// Counters are one volume's cumulative counters (summed over endpoints).
type Counters struct {
	Reads, Writes, ReadBytes, WriteBytes float64
	Delayed, WaitSeconds                 float64
	Latency                              Histogram // reads and writes
	Limits                               map[string]float64
}

// Scrape reads the metrics on url (http://HOST:PORT/metrics) into r,
// adding to what r holds (a volume served by several endpoints sums).
func Scrape(ctx context.Context, client *http.Client, url string, r *Reading) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("metrics on %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("metrics on %s: %s", url, resp.Status)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("metrics on %s: %w", url, err)
		}
		r.add(&mf)
	}
}

// add takes what it reads from one metric family.
func (r *Reading) add(mf *dto.MetricFamily) {
	for _, m := range mf.GetMetric() {
		vol, op := label(m, "volume"), label(m, "op")
		if vol == "" {
			continue
		}
		c := r.volume(vol)
		switch mf.GetName() {
		case metricOps:
			c.addOp(op, &c.Reads, &c.Writes, m.GetCounter().GetValue())
		case metricBytes:
			c.addOp(op, &c.ReadBytes, &c.WriteBytes, m.GetCounter().GetValue())
		case metricDelayed:
			c.Delayed += m.GetCounter().GetValue()
		case metricQoSWait:
			c.WaitSeconds += m.GetCounter().GetValue()
		case metricLatency:
			if op == "read" || op == "write" {
				c.Latency.Add(histogramOf(m.GetHistogram()))
			}
		case metricQoSLimit:
			c.Limits[label(m, "limit")] = m.GetGauge().GetValue()
		}
	}
}

func (r *Reading) volume(name string) *Counters {
	if r.Volumes == nil {
		r.Volumes = map[string]*Counters{}
	}
	c := r.Volumes[name]
	if c == nil {
		c = &Counters{Limits: map[string]float64{}}
		r.Volumes[name] = c
	}
	return c
}

func (c *Counters) addOp(op string, read, write *float64, v float64) {
	switch op {
	case "read":
		*read += v
	case "write":
		*write += v
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Row is one volume's rates between two readings.
type Row struct {
	Volume string `json:"volume"`
	// Requests and bytes a second.
	ReadIOPS   float64 `json:"read_iops"`
	WriteIOPS  float64 `json:"write_iops"`
	ReadBytes  float64 `json:"read_bytes_per_second"`
	WriteBytes float64 `json:"write_bytes_per_second"`
	// Latency percentiles of the reads and writes between the readings,
	// in seconds (0: no request); QoS waits not included.
	P50   float64 `json:"p50_seconds"`
	P99   float64 `json:"p99_seconds"`
	P9999 float64 `json:"p99_99_seconds"`
	// QoSDelayed is the requests a second that waited for their turn
	// under the volume's QoS limits; QoSWait their mean wait in seconds.
	QoSDelayed float64 `json:"qos_delayed_per_second"`
	QoSWait    float64 `json:"qos_wait_seconds"`
	// Limits are the QoS limits the mapping applies (qos_limit; 0: none).
	Limits map[string]float64 `json:"qos_limits,omitempty"`
}

// Rates are the rows of the volumes in cur, by volume name, over the time
// since prev (a volume new in cur counts from zero).
func Rates(prev, cur Reading) []Row {
	dt := cur.At.Sub(prev.At).Seconds()
	if dt <= 0 {
		dt = math.Inf(1)
	}
	rows := []Row{}
	for _, name := range sortedKeys(cur.Volumes) {
		c, p := cur.Volumes[name], prev.Volumes[name]
		if p == nil {
			p = &Counters{}
		}
		lat := c.Latency.Sub(p.Latency)
		delayed := max(c.Delayed-p.Delayed, 0)
		row := Row{Volume: name, ReadIOPS: rate(c.Reads, p.Reads, dt), WriteIOPS: rate(c.Writes, p.Writes, dt),
			ReadBytes: rate(c.ReadBytes, p.ReadBytes, dt), WriteBytes: rate(c.WriteBytes, p.WriteBytes, dt),
			P50: lat.Quantile(0.5), P99: lat.Quantile(0.99), P9999: lat.Quantile(0.9999),
			QoSDelayed: delayed / dt, Limits: nonZero(c.Limits)}
		if delayed > 0 {
			row.QoSWait = max(c.WaitSeconds-p.WaitSeconds, 0) / delayed
		}
		rows = append(rows, row)
	}
	return rows
}

// rate is the increase a second; a counter that went down (the process
// restarted) counts from zero.
func rate(cur, prev, dt float64) float64 {
	if cur < prev {
		prev = 0
	}
	return (cur - prev) / dt
}

func nonZero(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
