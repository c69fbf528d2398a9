package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/controller/admin"
	"github.com/nvstripe/nvstripe/controllerd"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/units"
)

// controllerFlags are the flags of `nvstripe controller`.
type controllerFlags struct {
	controllerd.Settings
	hostNQN, metrics, api string
	gossip                gossipFlags
	gossipHost            string
	scrubInterval         time.Duration
	dhchap                dhchapFlags
	adminTLS              admin.TLSFiles
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
			"volume's moves are handed to its owner as task records in etcd; a volume nobody maps\n" +
			"read-write is opened by the controller itself, beside its read-only readers, which follow\n" +
			"the moves. Progress is in the task records (`nvstripe admin status`).",
		Args: cobra.NoArgs,
		RunE: serveWithStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
			cfg, err := f.runnerConfig(g, s)
			if err != nil {
				return err
			}
			nqn, err := nodeHostNQN(f.hostNQN)
			if err != nil {
				return err
			}
			secret, ctrl, err := f.dhchap.load()
			if err != nil {
				return err
			}
			f.gossip.Cluster = a.cluster
			d, err := controllerd.New(cmd.Context(), controllerd.Options{Runner: cfg, HostNQN: nqn, MetricsAddr: f.metrics,
				DHCHAPSecret: secret, DHCHAPCtrlSecret: ctrl, HostTraddr: f.HostTraddr, ScrubInterval: f.scrubInterval, Gossip: f.gossip.Spec,
				GossipHost: f.gossipHost, AdminAddr: f.api, AdminTLS: f.adminTLS})
			if err != nil {
				return specError(adminError(err))
			}
			defer d.Close()
			printListeners(cmd, d)
			report(cmd, map[string]string{"controller": d.Holder(), "state": "campaigning"}, "controller %s: campaigning for leadership", d.Holder())
			return d.Run(cmd.Context())
		}),
	}
	addEtcdFlags(c, a)
	f.register(c.Flags())
	return c
}

// register defines the flags on fl.
func (f *controllerFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.Holder, "holder", "", "this controller's name in etcd (default controller.HOSTNAME)")
	fl.DurationVar(&f.OutAfter, "out-after", 10*time.Minute, "a namespace down this long is marked out and rebuilt")
	fl.DurationVar(&f.Grace, "grace", 5*time.Second, "a host silent this long is down")
	fl.DurationVar(&f.Interval, "interval", time.Second, "time between decisions")
	fl.DurationVar(&f.ProbeTimeout, "probe-timeout", time.Second, "TCP probe timeout of a namespace path")
	fl.DurationVar(&f.LeaderTTL, "leader-ttl", 10*time.Second, "leadership lease TTL: how soon another controller takes over")
	f.Bandwidth = 256 << 20
	fl.Var(units.NewFlag(&f.Bandwidth), "bandwidth", "bytes per second the controller's own moves may use (0: unlimited)")
	fl.IntVar(&f.MaxMoves, "max-moves", 32, "moves in flight in the whole cluster")
	fl.IntVar(&f.MaxMovesPerNS, "max-moves-per-ns", 2, "moves in flight writing to or copying from one namespace")
	fl.Float64Var(&f.MinUp, "min-up", 0.5, "mark namespaces out only while at least this fraction of hosts is up (fewer suggests the controller is cut off; negative: no guard)")
	fl.StringVar(&f.api, "api", admin.DefaultSocket, "the gRPC admin API, for admin --controller: a unix socket PATH (mode 0600), or HOST:PORT with --admin-tls-* (\"\": off)")
	registerAdminTLS(fl, &f.adminTLS, "the controller's")
	fl.DurationVar(&f.scrubInterval, "scrub-interval", 7*24*time.Hour, "how often the owner of each checksummed, mapped volume scrubs it (0: never; `admin scrub` starts one now)")
	fl.StringVar(&f.metrics, "metrics", "", "HOST:PORT of the Prometheus metrics listener (tasks, volume health; \"\": off)")
	fl.StringVar(&f.hostNQN, "host-nqn", "", hostNQNUsage)
	fl.StringVar(&f.HostTraddr, "host-traddr", "", hostTraddrUsage)
	f.dhchap.register(fl)
	fl.BoolVar(&f.Probe, "probe", true, "TCP-probe the namespace paths of hosts that do not gossip (false: such hosts are not tracked)")
	fl.StringVar(&f.gossipHost, "gossip-host", "", "the host name this controller gossips (default: the machine's host name)")
	f.gossip.register(fl)
}

// printListeners says where the controller gossips and serves metrics and
// the admin API.
func printListeners(cmd *cobra.Command, d *controllerd.Daemon) {
	h := d.Holder()
	if a := d.GossipAddr(); a != "" {
		report(cmd, map[string]string{"controller": h, "gossip": a}, "controller %s: gossip on %s", h, a)
	}
	if u := d.MetricsURL(); u != "" {
		report(cmd, map[string]string{"controller": h, "metrics": u}, "controller %s: metrics on %s", h, u)
	}
	if a := d.AdminAddr(); a != "" {
		report(cmd, map[string]string{"controller": h, "admin_api": a}, "controller %s: admin API on %s", h, a)
	}
}

// runnerConfig turns the flags into the controller's options.
func (f *controllerFlags) runnerConfig(g *globals, s *meta.Store) (controller.RunnerConfig, error) {
	if f.gossip.Addr == "" && (len(f.gossip.Join) > 0 || f.gossipHost != "") {
		return controller.RunnerConfig{}, usageError{fmt.Errorf("--gossip-join and --gossip-host need --gossip")}
	}
	f.Gossip = f.gossip.Addr != ""
	cfg, err := f.Settings.RunnerConfig(s, g.logger("controller"))
	if errors.Is(err, controllerd.ErrSettings) {
		return cfg, usageError{err}
	}
	return cfg, err
}
