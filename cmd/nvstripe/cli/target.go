package cli

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/internal/logging"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nvmeof/target"
	"github.com/nvstripe/nvstripe/targetd"
)

func newTargetCmd(g *globals) *cobra.Command {
	return groupCmd("target", "Userspace NVMe/TCP target; health gossip for a host's target",
		newTargetServeCmd(g), newTargetANAStateCmd(), newTargetAgentCmd(g))
}

func newTargetServeCmd(g *globals) *cobra.Command {
	var f targetd.Flags
	var auth config.EtcdFlags // etcd, only to find gossip seeds without --gossip-join
	c := &cobra.Command{
		Use: "serve --dir D --listen ADDR[,ADDR...] --nqn NQN --ns NAME:SIZE [--ns ...] {--allow-host NQN|any | --host-keys FILE}\n" +
			"      [--gossip IP:PORT --host NAME [--gossip-join IP:PORT,...] [--label KEY=VALUE ...]]",
		Short: "Serve file-backed namespaces over NVMe/TCP until interrupted",
		Long: "serve exports one subsystem whose namespaces are files DIR/NAME.img (created sparse at SIZE\n" +
			"when missing; an existing file must have that size). NSIDs follow the order of --ns.\n" +
			"NVMe reservations (registrations and the reservation) of each namespace are kept in\n" +
			"DIR/NAME.resv, so a fenced writer stays fenced across a restart.\n" +
			"Every listener also serves the discovery subsystem. --ana-group NAME:GROUP puts a namespace\n" +
			"in an ANA group (default 1); all groups start optimized on every listener. --control ADDR\n" +
			"serves an HTTP control API (see 'target ana-state'); every request must carry its token, the\n" +
			"first line of --control-token-file or else of DIR/" + targetd.ControlTokenName + ", which serve creates (mode 0600)\n" +
			"when missing.\n\n" +
			"Who is served: --allow-host NQN admits a host on the NQN it claims, which proves nothing;\n" +
			"--host-keys FILE admits the hosts it lists only once they authenticate with DH-HMAC-CHAP\n" +
			"(they need no --allow-host). One of the two is required (see docs/security.md).\n\n" +
			"--gossip IP:PORT puts the target in the health gossip pool as host --host (its name in etcd,\n" +
			"see 'nvstripe host add'): the controller then judges the host alive or dead by gossip instead\n" +
			"of TCP probes. It joins --gossip-join, or without it the members registered in etcd (--etcd),\n" +
			"registering itself there too; it keeps retrying until it finds the pool. On interrupt it\n" +
			"leaves the pool cleanly (its namespaces go down after the controller's --grace); a crash is\n" +
			"noticed by gossip's failure detection.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTargetServe(cmd, g, &f, &auth) },
	}
	auth.AddFlags(c.PersistentFlags())
	f.AddFlags(c.Flags())
	return withPprof(g, c, "target")
}

// runTargetServe serves the namespaces until the command's context ends.
func runTargetServe(cmd *cobra.Command, g *globals, f *targetd.Flags, auth *config.EtcdFlags) error {
	f.Gossip.Cluster = auth.Cluster
	o, err := f.Options()
	if err != nil {
		return err
	}
	o.Store = func(ctx context.Context) (*meta.Store, error) { return openStore(ctx, g, auth) }
	o.Logf, o.GossipLogf = logging.Logf(g.logger("target")), logging.Logf(g.logger("gossip"))
	d, err := targetd.Start(cmd.Context(), o)
	if targetd.IsSpec(err) {
		return usageError{err}
	} else if err != nil {
		return err
	}
	defer d.Close()
	if err := report(cmd, d.Ready(), "%s", d.Ready()); err != nil {
		return err
	}
	notifyServing(cmd.Context(), g.logger("target"))
	<-cmd.Context().Done()
	return nil
}

func newTargetANAStateCmd() *cobra.Command {
	var control, tokenFile, dir, listener, state string
	var group uint32
	c := &cobra.Command{
		Use:   "ana-state --control ADDR --dir D|--control-token-file F [--listener L --group G --state S]",
		Short: "Show or change ANA group states of a running 'target serve'",
		Long: "Without --state, lists the state of every group on every listener. With --listener (index\n" +
			"or address), --group and --state (optimized, non-optimized, inaccessible, persistent-loss,\n" +
			"change), sets one state; the target sends an ANA-change event to the hosts on that listener.\n" +
			"The request carries the target's control token: --control-token-file, or the target's --dir\n" +
			"(its " + targetd.ControlTokenName + ").",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if control == "" {
				return usageError{errors.New("--control is required")}
			}
			if tokenFile == "" && dir != "" {
				tokenFile = filepath.Join(dir, targetd.ControlTokenName)
			}
			if tokenFile == "" {
				return usageError{errors.New("--control-token-file or --dir is required (the target's control token)")}
			}
			token, err := config.ReadSecretFile("--control-token-file", tokenFile)
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
			return report(cmd, anaChanged(listener, group, state), "listener %s group %d: %s", listener, group, state)
		},
	}
	c.Flags().StringVar(&control, "control", "", "address of the target's control API (its --control)")
	c.Flags().StringVar(&tokenFile, "control-token-file", "", "file holding the target's control token (its --control-token-file)")
	c.Flags().StringVar(&dir, "dir", "", "the target's --dir, whose "+targetd.ControlTokenName+" holds the token")
	c.Flags().StringVar(&listener, "listener", "0", "listener index or address")
	c.Flags().Uint32Var(&group, "group", 1, "ANA group ID")
	c.Flags().StringVar(&state, "state", "", "new state; empty lists the states")
	return c
}

// anaChanged is the JSON result of `target ana-state --state`, keyed as the
// listing's entries are: the listener as its index (a number) or its
// address.
func anaChanged(listener string, group uint32, state string) map[string]any {
	out := map[string]any{"group": group, "state": state}
	if i, err := strconv.Atoi(listener); err == nil {
		out["listener"] = i
	} else {
		out["address"] = listener
	}
	return out
}
