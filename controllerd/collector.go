package controllerd

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
)

// collector reads the cluster from etcd at each scrape: whether this
// controller leads, task progress, volume redundancy and namespace states.
type collector struct {
	store  *meta.Store
	runner *controller.Runner
	holder string

	leader      *prometheus.Desc
	taskDone    *prometheus.Desc
	taskTotal   *prometheus.Desc
	tasks       *prometheus.Desc
	lost        *prometheus.Desc
	degraded    *prometheus.Desc
	namespaces  *prometheus.Desc
	scrapeError *prometheus.Desc
}

// newCollector builds the collector and its metric descriptions.
func newCollector(s *meta.Store, r *controller.Runner, holder string) *collector {
	return &collector{store: s, runner: r, holder: holder,
		leader:      prometheus.NewDesc("nvstripe_controller_leader", "1 while this controller leads.", []string{"holder"}, nil),
		taskDone:    prometheus.NewDesc("nvstripe_task_done_bytes", "Bytes of shard data a move task has copied.", []string{"task", "kind", "volume", "state"}, nil),
		taskTotal:   prometheus.NewDesc("nvstripe_task_total_bytes", "Bytes of shard data a move task copies in all.", []string{"task", "kind", "volume", "state"}, nil),
		tasks:       prometheus.NewDesc("nvstripe_tasks", "Task records by kind and state.", []string{"kind", "state"}, nil),
		lost:        prometheus.NewDesc("nvstripe_volume_lost_shards", "Most shards one segment of the volume has on namespaces not in service.", []string{"volume"}, nil),
		degraded:    prometheus.NewDesc("nvstripe_volume_degraded_segments", "Segments of the volume with a lost shard.", []string{"volume"}, nil),
		namespaces:  prometheus.NewDesc("nvstripe_namespaces", "Namespaces by state.", []string{"state"}, nil),
		scrapeError: prometheus.NewDesc("nvstripe_controller_scrape_error", "1 when etcd could not be read for this scrape.", nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leader, c.taskDone, c.taskTotal, c.tasks, c.lost, c.degraded, c.namespaces, c.scrapeError} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	leading := 0.0
	if c.runner.Leading() {
		leading = 1
	}
	ch <- prometheus.MustNewConstMetric(c.leader, prometheus.GaugeValue, leading, c.holder)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	snap, err := controller.LoadSnapshot(ctx, c.store)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.scrapeError, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.scrapeError, prometheus.GaugeValue, 0)
	c.collectTasks(ch, snap)
	for _, v := range snap.Health() {
		ch <- prometheus.MustNewConstMetric(c.lost, prometheus.GaugeValue, float64(v.Lost), v.Volume)
		ch <- prometheus.MustNewConstMetric(c.degraded, prometheus.GaugeValue, float64(v.Degraded), v.Volume)
	}
	states := map[string]int{}
	for _, n := range snap.State.Namespaces {
		states[n.State.String()]++
	}
	for state, n := range states {
		ch <- prometheus.MustNewConstMetric(c.namespaces, prometheus.GaugeValue, float64(n), state)
	}
}

// collectTasks counts the task records by kind and state, with the
// progress of each move task.
func (c *collector) collectTasks(ch chan<- prometheus.Metric, snap *controller.Snapshot) {
	counts := map[[2]string]int{}
	for _, r := range snap.Tasks {
		kind, vol := r.Kind, ""
		if mt, ok, err := moves.ParseTask(r); ok && err == nil {
			kind, vol = mt.Kind.String(), mt.Segment.Volume
		}
		kind = strings.Fields(kind + " -")[0]
		counts[[2]string{kind, r.State}]++
		if vol != "" {
			ch <- prometheus.MustNewConstMetric(c.taskDone, prometheus.GaugeValue, float64(r.Done), r.ID, kind, vol, r.State)
			ch <- prometheus.MustNewConstMetric(c.taskTotal, prometheus.GaugeValue, float64(r.Total), r.ID, kind, vol, r.State)
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}
