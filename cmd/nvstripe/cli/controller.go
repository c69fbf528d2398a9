package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/units"
)

// controllerFlags are the flags of `nvstripe controller`.
type controllerFlags struct {
	holder, hostNQN           string
	bandwidth                 int64
	metrics, api              string
	outAfter, interval, grace time.Duration
	probeTimeout, leaderTTL   time.Duration
	maxMoves, maxMovesPerNS   int
	minUp                     float64
	probe                     bool
	gossip                    gossipFlags
	gossipHost                string
}

// newControllerCmd is `nvstripe controller`: the rebuild, drain and
// rebalance daemon, in the foreground.
func newControllerCmd(g *globals) *cobra.Command {
	a := &etcdAuth{}
	var f controllerFlags
	c := &cobra.Command{
		Use:   "controller [--out-after 10m] [--holder NAME] [--bandwidth 256MiB] [--gossip IP:PORT [--gossip-join IP:PORT,...]]",
		Short: "Run the controller: rebuild lost shards, drain and rebalance (one of several leads)",
		Long: "controller runs in the foreground until interrupted. Several may run: one leads, elected\n" +
			"through etcd; the others wait and take over when the leader goes away. With --gossip the\n" +
			"controller joins the health gossip pool (--gossip-join, or the members registered in etcd;\n" +
			"it registers itself there): a host with a gossiping target ('target serve --gossip', 'target\n" +
			"agent') is judged by gossip; the leader probes the paths of the other hosts' namespaces over\n" +
			"TCP (--probe). A host silent for --grace is down; down for --out-after it is out (a host that\n" +
			"flaps is held down instead of coming and going; nothing goes out while fewer than --min-up\n" +
			"of the hosts are up). The leader rebuilds the shards of out and\n" +
			"failed namespaces, drains draining ones and carries out `admin rebalance --apply`. A mapped\n" +
			"volume's moves are handed to its owner as task records in etcd; an unmapped volume is opened\n" +
			"by the controller itself, unless readers map it read-only: its moves then wait until they\n" +
			"unmap. Progress is in the task records (`nvstripe admin status`).",
		Args: cobra.NoArgs,
		RunE: withStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
			cfg, err := f.runnerConfig(cmd, s)
			if err != nil {
				return err
			}
			r, err := controller.NewRunner(cfg)
			if err != nil {
				return err
			}
			if cfg.Gossip != nil {
				stop, err := f.startGossip(cmd, s, cfg)
				if err != nil {
					return err
				}
				defer stop()
			}
			if f.metrics != "" {
				addr, stop, err := serveControllerMetrics(s, r, cfg.Holder, f.metrics)
				if err != nil {
					return err
				}
				defer stop()
				fmt.Fprintf(cmd.OutOrStdout(), "controller %s: metrics on http://%s/metrics\n", cfg.Holder, addr)
			}
			if f.api != "" {
				addr, stop, err := serveAdminAPI(s, f.api)
				if err != nil {
					return err
				}
				defer stop()
				fmt.Fprintf(cmd.OutOrStdout(), "controller %s: admin API on %s\n", cfg.Holder, addr)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "controller %s: campaigning for leadership\n", cfg.Holder)
			return r.Run(cmd.Context())
		}),
	}
	addEtcdFlags(c, a)
	f.register(c.Flags())
	return c
}

// register defines the flags on fl.
func (f *controllerFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.holder, "holder", "", "this controller's name in etcd (default controller.HOSTNAME)")
	fl.DurationVar(&f.outAfter, "out-after", 10*time.Minute, "a namespace down this long is marked out and rebuilt")
	fl.DurationVar(&f.grace, "grace", 5*time.Second, "a host silent this long is down")
	fl.DurationVar(&f.interval, "interval", time.Second, "time between decisions")
	fl.DurationVar(&f.probeTimeout, "probe-timeout", time.Second, "TCP probe timeout of a namespace path")
	fl.DurationVar(&f.leaderTTL, "leader-ttl", 10*time.Second, "leadership lease TTL: how soon another controller takes over")
	f.bandwidth = 256 << 20
	fl.Var(units.NewFlag(&f.bandwidth), "bandwidth", "bytes per second the controller's own moves may use (0: unlimited)")
	fl.IntVar(&f.maxMoves, "max-moves", 32, "moves in flight in the whole cluster")
	fl.IntVar(&f.maxMovesPerNS, "max-moves-per-ns", 2, "moves in flight writing to or copying from one namespace")
	fl.Float64Var(&f.minUp, "min-up", 0.5, "mark namespaces out only while at least this fraction of hosts is up (fewer suggests the controller is cut off; negative: no guard)")
	fl.StringVar(&f.api, "api", "", "HOST:PORT of the gRPC admin API, for admin --controller (\"\": off)")
	fl.StringVar(&f.metrics, "metrics", "", "HOST:PORT of the Prometheus metrics listener (tasks, volume health; \"\": off)")
	fl.StringVar(&f.hostNQN, "host-nqn", "", "NVMe host NQN the controller connects as (default: nvstripe's)")
	fl.BoolVar(&f.probe, "probe", true, "TCP-probe the namespace paths of hosts that do not gossip (false: such hosts are not tracked)")
	fl.StringVar(&f.gossipHost, "gossip-host", "", "the host name this controller gossips (default: the machine's host name)")
	f.gossip.register(fl)
}

// startGossip puts the controller in the gossip pool, its events feeding
// cfg.Gossip, and registers its address in etcd. It returns the function
// that leaves the pool.
func (f *controllerFlags) startGossip(cmd *cobra.Command, s *meta.Store, cfg controller.RunnerConfig) (func(), error) {
	host := f.gossipHost
	if host == "" {
		var err error
		if host, err = os.Hostname(); err != nil {
			return nil, err
		}
	}
	hc, err := f.gossip.config(health.Meta{Role: health.RoleController, Host: host}, cfg.Holder)
	if err != nil {
		return nil, err
	}
	hc.OnEvent = cfg.Gossip.OnEvent
	store := func(context.Context) (*meta.Store, error) { return s, nil }
	gs, err := startGossip(hc, f.gossip.gossipSeeds(store), store, cfg.Logf)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "controller %s: gossip on %s\n", cfg.Holder, gs.node.Addr())
	return gs.stop, nil
}

func (f *controllerFlags) runnerConfig(cmd *cobra.Command, s *meta.Store) (controller.RunnerConfig, error) {
	cl, err := s.Cluster(cmd.Context())
	if err != nil {
		return controller.RunnerConfig{}, err
	}
	if f.holder == "" {
		host, err := os.Hostname()
		if err != nil {
			return controller.RunnerConfig{}, err
		}
		f.holder = "controller." + host
	}
	bw := f.bandwidth
	if bw == 0 {
		bw = -1
	}
	pacer, err := controller.NewPacer(controller.PacerConfig{Bandwidth: bw})
	if err != nil {
		return controller.RunnerConfig{}, usageError{err}
	}
	if f.gossip.addr == "" && (len(f.gossip.join) > 0 || f.gossipHost != "") {
		return controller.RunnerConfig{}, usageError{fmt.Errorf("--gossip-join and --gossip-host need --gossip")}
	}
	logf := lineLogger(cmd.ErrOrStderr())
	mover := agent.NewTaskMover(s, agent.OpenOptions{Holder: f.holder, LeaseTTL: f.leaderTTL,
		Namespaces: agent.NamespaceOptions{HostNQN: f.hostNQN}, Logf: logf})
	cfg := controller.RunnerConfig{Store: s, Holder: f.holder, Interval: f.interval, LeaderTTL: f.leaderTTL,
		Decide: controller.Config{OutAfter: f.outAfter, MaxMoves: f.maxMoves, MaxMovesPerNS: f.maxMovesPerNS,
			DomainLabel: cl.DomainLabel, MinUpFraction: f.minUp},
		Mover: mover, Pacer: pacer, Health: health.TrackerConfig{Grace: f.grace}, Logf: logf}
	if f.probe {
		cfg.Probe = controller.ProbeTCP(f.probeTimeout)
	}
	if f.gossip.addr != "" {
		cfg.Gossip = controller.NewGossip(nil)
	}
	return cfg, nil
}

// serveAdminAPI serves the gRPC admin API on addr. It returns the bound
// address and a function that stops the server.
func serveAdminAPI(s *meta.Store, addr string) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("admin API listener: %w", err)
	}
	srv := newAdminServer(s)
	go srv.Serve(ln)
	return ln.Addr().String(), srv.Stop, nil
}

// serveControllerMetrics serves Prometheus metrics on addr: whether this
// controller leads, and, read from etcd at each scrape, task progress,
// volume redundancy and namespace states. It returns the bound address and
// a function that stops the listener.
func serveControllerMetrics(s *meta.Store, r *controller.Runner, holder, addr string) (string, func(), error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(newControllerCollector(s, r, holder)); err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	return ln.Addr().String(), func() { hs.Close() }, nil
}

// newControllerCollector builds the collector and its metric descriptions.
func newControllerCollector(s *meta.Store, r *controller.Runner, holder string) *controllerCollector {
	return &controllerCollector{store: s, runner: r, holder: holder,
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

// controllerCollector reads the cluster from etcd at each scrape.
type controllerCollector struct {
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

func (c *controllerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leader, c.taskDone, c.taskTotal, c.tasks, c.lost, c.degraded, c.namespaces, c.scrapeError} {
		ch <- d
	}
}

func (c *controllerCollector) Collect(ch chan<- prometheus.Metric) {
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
	st := buildStatus(snap, time.Now())
	counts := map[[2]string]int{}
	for _, t := range st.Tasks {
		kind := strings.Fields(t.Kind + " -")[0]
		counts[[2]string{kind, t.State}]++
		if t.Segment != "" {
			vol, _, _ := strings.Cut(t.Segment, "/")
			ch <- prometheus.MustNewConstMetric(c.taskDone, prometheus.GaugeValue, float64(t.Done), t.ID, kind, vol, t.State)
			ch <- prometheus.MustNewConstMetric(c.taskTotal, prometheus.GaugeValue, float64(t.Total), t.ID, kind, vol, t.State)
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	for _, v := range st.Volumes {
		ch <- prometheus.MustNewConstMetric(c.lost, prometheus.GaugeValue, float64(v.Lost), v.Volume)
		ch <- prometheus.MustNewConstMetric(c.degraded, prometheus.GaugeValue, float64(v.Degraded), v.Volume)
	}
	states := map[string]int{}
	for _, n := range st.Namespaces {
		states[n.State]++
	}
	for state, n := range states {
		ch <- prometheus.MustNewConstMetric(c.namespaces, prometheus.GaugeValue, float64(n), state)
	}
}
