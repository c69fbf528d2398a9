package cli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/health/pool"
	"github.com/nvstripe/nvstripe/internal/logging"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/targetd"
)

// newTargetAgentCmd is `nvstripe target agent`: the gossip member of a host
// whose namespaces a kernel nvmet or SPDK target serves (`target serve`
// gossips by itself with --gossip).
func newTargetAgentCmd(g *globals) *cobra.Command {
	var (
		f     pool.Spec
		a     config.EtcdFlags
		host  string
		names []string
	)
	c := &cobra.Command{
		Use:   "agent --host NAME --gossip IP:PORT [--gossip-join IP:PORT,...] [--label KEY=VALUE ...] [--ns NAME ...]",
		Short: "Gossip health for a host whose target is a kernel nvmet or SPDK target",
		Long: "agent runs in the foreground until interrupted and only gossips: it is the health member of\n" +
			"host --host (its name in etcd) beside a target nvstripe does not run, so that the controller\n" +
			"judges the host by gossip instead of TCP probes. Run it on the target's machine and stop it\n" +
			"with the target (a systemd unit bound to nvmet or SPDK): while it is silent the host's\n" +
			"namespaces go down, and out after the controller's --out-after. It joins --gossip-join, or\n" +
			"without it the members registered in etcd (--etcd), registering itself there too; on\n" +
			"interrupt it leaves the pool. --ns names the namespaces it stands for (informational).",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annotationNoSelfTest: "gossip only"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.Addr == "" {
				return usageError{errors.New("target agent needs --gossip and --host")}
			}
			f.Cluster = a.Cluster
			leave, addr, err := targetd.Gossip(f, host, names, func(ctx context.Context) (*meta.Store, error) { return openStore(ctx, g, &a) },
				logging.Logf(g.logger("gossip")))
			if err != nil {
				return specError(err)
			}
			defer leave()
			report(cmd, map[string]any{"gossip": addr, "host": host, "ready": true}, "gossip: %s as host %s\nready", addr, host)
			<-cmd.Context().Done()
			return nil
		},
	}
	addEtcdFlags(g, c, &a)
	fl := c.Flags()
	fl.StringVar(&host, "host", "", "this host's name in etcd, see 'nvstripe host add' (required)")
	fl.StringArrayVar(&f.Labels, "label", nil, "failure-domain label KEY=VALUE gossiped, repeatable")
	fl.StringArrayVar(&names, "ns", nil, "name of a namespace the target serves, repeatable (informational)")
	f.AddFlags(fl)
	return c
}

// specError makes a malformed gossip setting a usage error.
func specError(err error) error {
	if errors.Is(err, pool.ErrSpec) {
		return usageError{err}
	}
	return err
}
