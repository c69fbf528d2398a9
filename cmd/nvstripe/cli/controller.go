package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/meta"
)

// controllerFlags are the flags of `nvstripe controller`.
type controllerFlags struct {
	holder, bandwidth, hostNQN string
	outAfter, interval, grace  time.Duration
	probeTimeout, leaderTTL    time.Duration
	maxMoves, maxMovesPerNS    int
}

// newControllerCmd is `nvstripe controller`: the rebuild, drain and
// rebalance daemon, in the foreground.
func newControllerCmd(g *globals) *cobra.Command {
	a := &etcdAuth{}
	var f controllerFlags
	c := &cobra.Command{
		Use:   "controller [--out-after 10m] [--holder NAME] [--bandwidth 256MiB]",
		Short: "Run the controller: rebuild lost shards, drain and rebalance (one of several leads)",
		Long: "controller runs in the foreground until interrupted. Several may run: one leads, elected\n" +
			"through etcd; the others wait and take over when the leader goes away. The leader probes\n" +
			"every namespace's paths over TCP (a host none of whose namespaces answers for --grace is\n" +
			"down; down for --out-after it is out), rebuilds the shards of out and failed namespaces,\n" +
			"drains draining ones and carries out `admin rebalance --apply`. A mapped volume's moves are\n" +
			"handed to its owner as task records in etcd; an unmapped volume is opened by the controller\n" +
			"itself. Progress is in the task records (`nvstripe admin status`).",
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
			fmt.Fprintf(cmd.OutOrStdout(), "controller %s: campaigning for leadership\n", cfg.Holder)
			return r.Run(cmd.Context())
		}),
	}
	addEtcdFlags(c, a)
	fl := c.Flags()
	fl.StringVar(&f.holder, "holder", "", "this controller's name in etcd (default controller.HOSTNAME)")
	fl.DurationVar(&f.outAfter, "out-after", 10*time.Minute, "a namespace down this long is marked out and rebuilt")
	fl.DurationVar(&f.grace, "grace", 5*time.Second, "a host silent this long is down")
	fl.DurationVar(&f.interval, "interval", time.Second, "time between decisions")
	fl.DurationVar(&f.probeTimeout, "probe-timeout", time.Second, "TCP probe timeout of a namespace path")
	fl.DurationVar(&f.leaderTTL, "leader-ttl", 10*time.Second, "leadership lease TTL: how soon another controller takes over")
	fl.StringVar(&f.bandwidth, "bandwidth", "256MiB", "bytes per second the controller's own moves may use (0: unlimited)")
	fl.IntVar(&f.maxMoves, "max-moves", 32, "moves in flight in the whole cluster")
	fl.IntVar(&f.maxMovesPerNS, "max-moves-per-ns", 2, "moves in flight writing to or copying from one namespace")
	fl.StringVar(&f.hostNQN, "host-nqn", "", "NVMe host NQN the controller connects as (default: nvstripe's)")
	return c
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
	bw, err := parseSize(f.bandwidth)
	if err != nil {
		return controller.RunnerConfig{}, usageError{fmt.Errorf("--bandwidth: %w", err)}
	}
	if bw == 0 {
		bw = -1
	}
	pacer, err := controller.NewPacer(controller.PacerConfig{Bandwidth: bw})
	if err != nil {
		return controller.RunnerConfig{}, usageError{err}
	}
	logf := lineLogger(cmd.ErrOrStderr())
	mover := agent.NewTaskMover(s, agent.OpenOptions{Holder: f.holder, LeaseTTL: f.leaderTTL,
		Namespaces: agent.NamespaceOptions{HostNQN: f.hostNQN}})
	return controller.RunnerConfig{Store: s, Holder: f.holder, Interval: f.interval, LeaderTTL: f.leaderTTL,
		Decide: controller.Config{OutAfter: f.outAfter, MaxMoves: f.maxMoves, MaxMovesPerNS: f.maxMovesPerNS,
			DomainLabel: cl.DomainLabel},
		Mover: mover, Pacer: pacer, Probe: controller.ProbeTCP(f.probeTimeout),
		Health: health.TrackerConfig{Grace: f.grace}, Logf: logf}, nil
}
