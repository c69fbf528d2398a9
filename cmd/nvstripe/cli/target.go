package cli

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/logging"
	"github.com/nvstripe/nvstripe/nvmeof/target"
	"github.com/nvstripe/nvstripe/targetd"
	"github.com/nvstripe/nvstripe/units"
)

func newTargetCmd(g *globals) *cobra.Command {
	return groupCmd("target", "Userspace NVMe/TCP target; health gossip for a host's target",
		newTargetServeCmd(g), newTargetANAStateCmd(), newTargetAgentCmd(g))
}

// targetServeFlags are the flags of `target serve`.
type targetServeFlags struct {
	dir        string
	listen     string
	nqn        string
	ns         []string
	anaGroups  []string
	allowHosts []string
	blockSize  int64
	control    string
	ctlToken   string      // --control-token-file
	hostKeys   string      // --host-keys
	host       string      // --host: this host's name in etcd, for gossip
	gossip     gossipFlags // --gossip, --gossip-join, --gossip-profile, --label
	auth       etcdAuth    // etcd, only to find gossip seeds without --gossip-join
	maxConns   int         // --max-connections
	metrics    string      // --metrics-listen
}

func newTargetServeCmd(g *globals) *cobra.Command {
	var f targetServeFlags
	c := &cobra.Command{
		Use: "serve --dir D --listen ADDR[,ADDR...] --nqn NQN --ns NAME:SIZE [--ns ...] --allow-host NQN|any\n" +
			"      [--gossip IP:PORT --host NAME [--gossip-join IP:PORT,...] [--label KEY=VALUE ...]]",
		Short: "Serve file-backed namespaces over NVMe/TCP until interrupted",
		Long: "serve exports one subsystem whose namespaces are files DIR/NAME.img (created sparse at SIZE\n" +
			"when missing; an existing file must have that size). NSIDs follow the order of --ns.\n" +
			"NVMe reservations (registrations and the reservation) of each namespace are kept in\n" +
			"DIR/NAME.resv, so a fenced writer stays fenced across a restart.\n" +
			"Every listener also serves the discovery subsystem. --ana-group NAME:GROUP puts a namespace\n" +
			"in an ANA group (default 1); all groups start optimized on every listener. --control ADDR\n" +
			"serves an HTTP control API (see 'target ana-state') on a loopback address; another address\n" +
			"needs --control-token-file, whose token every request must then carry.\n\n" +
			"--gossip IP:PORT puts the target in the health gossip pool as host --host (its name in etcd,\n" +
			"see 'nvstripe host add'): the controller then judges the host alive or dead by gossip instead\n" +
			"of TCP probes. It joins --gossip-join, or without it the members registered in etcd (--etcd),\n" +
			"registering itself there too; it keeps retrying until it finds the pool. On interrupt it\n" +
			"leaves the pool cleanly (its namespaces go down after the controller's --grace); a crash is\n" +
			"noticed by gossip's failure detection.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTargetServe(cmd, g, &f) },
	}
	addEtcdFlags(c, &f.auth)
	fl := c.Flags()
	fl.StringVar(&f.dir, "dir", "", "directory holding the namespace files (required)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:4420", "listen addresses, comma-separated")
	fl.StringVar(&f.nqn, "nqn", "", "subsystem NQN (required)")
	fl.StringArrayVar(&f.ns, "ns", nil, "namespace NAME:SIZE (e.g. data0:10GiB), repeatable")
	fl.StringArrayVar(&f.anaGroups, "ana-group", nil, "ANA group of a namespace, NAME:GROUP, repeatable")
	fl.StringArrayVar(&f.allowHosts, "allow-host", nil, "host NQN allowed to connect, or 'any', repeatable (required)")
	f.blockSize = 4096
	fl.Var(units.NewFlag(&f.blockSize), "block-size", "logical block size of new namespaces")
	fl.IntVar(&f.maxConns, "max-connections", 1024, "connections each listener serves at once; one beyond is closed at once (negative: no cap)")
	fl.StringVar(&f.metrics, "metrics-listen", "", "serve Prometheus metrics (per-namespace IO, connections, refusals) on HOST:PORT/metrics")
	fl.StringVar(&f.control, "control", "", "serve the HTTP control API on this address (e.g. 127.0.0.1:4480); loopback only without --control-token-file")
	fl.StringVar(&f.hostKeys, "host-keys", "", "file of hosts that must authenticate (DH-HMAC-CHAP): lines 'HOSTNQN DHHC-1:... [CTRL-DHHC-1:...]'")
	fl.StringVar(&f.ctlToken, "control-token-file", "", "file holding a bearer token every control API request must carry")
	fl.StringVar(&f.host, "host", "", "this host's name in etcd (nvstripe host add), gossiped with --gossip")
	fl.StringArrayVar(&f.gossip.Labels, "label", nil, "failure-domain label KEY=VALUE gossiped with --gossip, repeatable")
	f.gossip.register(fl)
	return c
}

// runTargetServe serves the namespaces until the command's context ends.
func runTargetServe(cmd *cobra.Command, g *globals, f *targetServeFlags) error {
	token := ""
	if f.control != "" {
		var err error
		if token, err = readSecretFile("--control-token-file", f.ctlToken); err != nil {
			return err
		}
	}
	f.gossip.Cluster = f.auth.cluster
	store := lazyStore(g, &f.auth)
	defer store.Close()
	d, err := targetd.Start(cmd.Context(), targetd.Options{Files: target.FileSpec{Dir: f.dir, NQN: f.nqn,
		Listen: strings.Split(f.listen, ","), Namespaces: f.ns, ANAGroups: f.anaGroups, AllowHosts: f.allowHosts,
		BlockSize: int(f.blockSize)}, HostKeysFile: f.hostKeys, MaxConnections: f.maxConns, Control: f.control,
		ControlToken: token, Metrics: f.metrics, Gossip: f.gossip.Spec, Host: f.host, Store: store.Open,
		Logf: logging.Logf(g.logger("target")), GossipLogf: logging.Logf(g.logger("gossip"))})
	if targetd.IsSpec(err) {
		return usageError{err}
	} else if err != nil {
		return err
	}
	defer d.Close()
	if err := report(cmd, d.Ready(), "%s", d.Ready()); err != nil {
		return err
	}
	<-cmd.Context().Done()
	return nil
}

func newTargetANAStateCmd() *cobra.Command {
	var control, tokenFile, listener, state string
	var group uint32
	c := &cobra.Command{
		Use:   "ana-state --control ADDR [--listener L --group G --state S]",
		Short: "Show or change ANA group states of a running 'target serve'",
		Long: "Without --state, lists the state of every group on every listener. With --listener (index\n" +
			"or address), --group and --state (optimized, non-optimized, inaccessible, persistent-loss,\n" +
			"change), sets one state; the target sends an ANA-change event to the hosts on that listener.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if control == "" {
				return usageError{errors.New("--control is required")}
			}
			token, err := readSecretFile("--control-token-file", tokenFile)
			if err != nil {
				return err
			}
			cc := target.ControlClient{Addr: control, Token: token}
			if state == "" {
				es, err := cc.ANAStates(cmd.Context())
				if err != nil {
					return err
				}
				return writeOut(cmd, es, target.WriteANAStates)
			}
			if err := cc.SetANAState(cmd.Context(), listener, group, state); err != nil {
				return err
			}
			return report(cmd, map[string]any{"listener": listener, "group": group, "state": state}, "listener %s group %d: %s", listener, group, state)
		},
	}
	c.Flags().StringVar(&control, "control", "", "address of the target's control API (its --control)")
	c.Flags().StringVar(&tokenFile, "control-token-file", "", "file holding the target's control token (its --control-token-file)")
	c.Flags().StringVar(&listener, "listener", "0", "listener index or address")
	c.Flags().Uint32Var(&group, "group", 1, "ANA group ID")
	c.Flags().StringVar(&state, "state", "", "new state; empty lists the states")
	return c
}
