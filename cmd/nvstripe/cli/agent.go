package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volclient"
)

// newAgentCmd is `nvstripe agent`: the node daemon, in the foreground.
func newAgentCmd(g *globals) *cobra.Command {
	a := &config.EtcdFlags{}
	o := agent.ServeOptions{}
	var nf agent.NodeFlags
	c := &cobra.Command{
		Use:   "agent [--socket PATH] [--state-dir DIR] [--metrics 127.0.0.1:9475] [--holder NAME]",
		Short: "Run the node agent: map volumes on request, hold their leases, restore them after a restart",
		Long: "agent runs in the foreground until interrupted. It serves a gRPC API on --socket, used by\n" +
			"`nvstripe map|unmap|ls --agent SOCKET`; maps volumes over NBD (TCP or unix listener, or a\n" +
			"kernel /dev/nbdN) or FUSE; holds each volume's ownership lease in etcd (a volume whose lease\n" +
			"is lost is fenced: IO fails until it is unmapped); records its mappings in a badger database\n" +
			"under --state-dir and restores them when it starts again; reports namespaces that return\n" +
			"media errors as failed in etcd; and serves Prometheus metrics on --metrics (\"\" turns it off).\n" +
			"While etcd is unreachable it keeps serving for up to --lease-ttl; then it fences.",
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) (err error) {
			// What the agent checks as it starts, before etcd is dialled.
			if err := nf.Apply(&o.Options); err != nil {
				return err
			}
			if err := errors.Join(checkServeFlags(&o), o.Namespaces.Check(), checkHostPort("--metrics", o.MetricsAddr)); err != nil {
				return config.Usage(err)
			}
			o.Namespaces.HostNQN, err = nodeHostNQN(o.Namespaces.HostNQN)
			return err
		},
		RunE: serveWithStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
			o.Store, o.Log = s, g.logger("agent")
			o.Ready = func(ag *agent.Agent, metrics string) {
				st, url := ag.Status(), ""
				if metrics != "" {
					url = "http://" + metrics + "/metrics"
				}
				report(cmd, map[string]string{"agent": st.Holder, "socket": o.Socket, "state_dir": o.StateDir, "metrics": url},
					"agent %s: API on %s, state in %s, metrics on %s", st.Holder, o.Socket, o.StateDir, dash(url))
				notifyServing(cmd.Context(), o.Log)
			}
			return agent.Serve(cmd.Context(), o)
		}),
	}
	addEtcdFlags(g, c, a)
	o.AddFlags(c.Flags())
	c.Flags().StringVar(&o.Namespaces.HostNQN, "host-nqn", "", hostNQNUsage)
	c.Flags().StringVar(&o.Namespaces.HostTraddr, "host-traddr", "", volclient.HostTraddrUsage)
	nf.AddFlags(c.Flags())
	anyCluster(c) // a daemon may start before `cluster init`
	return withPprof(g, c, "agent")
}

// checkServeFlags checks the agent's own flags as the agent would use
// them, later, with etcd: a socket for the API, a directory to record the
// mappings in, a holder name etcd takes, an ownership lease TTL a mapping
// can be given, an interval a probe loop can tick at, and a count of media
// errors (0 would be taken as the default, 1).
func checkServeFlags(o *agent.ServeOptions) error {
	var errs []error
	if o.Socket == "" {
		errs = append(errs, fmt.Errorf("--socket is empty: give the path of the unix socket of the agent's API (default %s)", agent.DefaultSocket))
	}
	if o.StateDir == "" {
		errs = append(errs, fmt.Errorf("--state-dir is empty: give the directory where the agent records its mappings, to map them again when it restarts (default %s)", agent.DefaultStateDir))
	}
	if n := o.Report.FailNamespaceAfter; n == 0 || n < -1 {
		errs = append(errs, fmt.Errorf("--fail-namespace-after %d: give how many media errors mark a namespace failed, 1 or more, or -1 for never", n))
	}
	return errors.Join(append(errs, checkHolder(o.Holder), checkLeaseTTL("--lease-ttl", o.LeaseTTL, ""),
		checkNotNegative("--recheck-interval", o.RecheckInterval, "the default, 10s"))...)
}
