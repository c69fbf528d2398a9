package cli

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/controller/admin"
	"github.com/nvstripe/nvstripe/controllerd"
	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volclient"
)

// newControllerCmd is `nvstripe controller`: the rebuild, drain and
// rebalance daemon, in the foreground.
func newControllerCmd(g *globals) *cobra.Command {
	a := &config.EtcdFlags{}
	var f controllerd.Flags
	var hostNQN string
	var o controllerd.Options
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
		PreRunE: func(*cobra.Command, []string) (err error) {
			o, err = controllerOptions(g, a, &f, hostNQN)
			return err
		},
		RunE: serveWithStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
			o.Runner.Store = s
			d, err := controllerd.New(cmd.Context(), o)
			if err != nil {
				return specError(adminError(err))
			}
			defer d.Close()
			printListeners(cmd, d)
			report(cmd, map[string]string{"controller": d.Holder(), "state": "campaigning"}, "controller %s: campaigning for leadership", d.Holder())
			notifyServing(cmd.Context(), g.logger("controller"))
			return d.Run(cmd.Context())
		}),
	}
	addEtcdFlags(g, c, a)
	f.AddFlags(c.Flags())
	c.Flags().StringVar(&hostNQN, "host-nqn", "", hostNQNUsage)
	anyCluster(c) // a daemon may start before `cluster init`
	return withPprof(g, c, "controller")
}

// controllerOptions checks the controller's flags, before etcd is dialled,
// with the checks the daemon makes as it starts (settings, gossip, the host
// address, secret and TLS files, the admin API), and turns them into the
// daemon's Options but the store. Mistakes are usage errors.
func controllerOptions(g *globals, a *config.EtcdFlags, f *controllerd.Flags, hostNQN string) (controllerd.Options, error) {
	f.Gossip.Cluster = a.Cluster
	o, err := f.Options(nil, "", g.logger("controller"))
	if err != nil {
		return o, err
	}
	if f.Gossip.Addr != "" {
		if _, err := f.Gossip.Member(health.Meta{Role: health.RoleController, Host: f.GossipHost}, "controller"); err != nil {
			return o, config.Usage(err)
		}
	}
	nso := volclient.NamespaceOptions{HostTraddr: o.HostTraddr}
	if err := errors.Join(checkSettings(f), o.Runner.Decide.Validate(), o.Runner.Health.Validate(), nso.Check(), checkHostPort("--metrics", o.MetricsAddr)); err != nil {
		return o, config.Usage(err)
	}
	if o.AdminAddr != "" {
		if err := admin.CheckListen(o.AdminAddr, o.AdminTLS); err != nil {
			return o, config.Usage(err)
		}
	}
	o.HostNQN, err = nodeHostNQN(hostNQN)
	return o, err
}

// checkSettings checks the controller's flags that its libraries take
// as they are or default, later, with etcd: a holder name etcd takes, a
// TTL its mover can hold volumes with and intervals a loop can tick at (the
// scrub schedule's ticker gets a tenth of --scrub-interval). The probe's
// time limit is checked by controllerd (Flags.Options).
func checkSettings(f *controllerd.Flags) error {
	errs := []error{checkHolder(f.Holder),
		checkLeaseTTL("--leader-ttl", f.LeaderTTL, "the controller also holds the volumes it moves that long"),
		checkNotNegative("--interval", f.Interval, "the default, 1s"),
		checkNotNegative("--scrub-interval", f.ScrubInterval, "no scheduled scrubs")}
	if f.ScrubInterval > 0 && f.ScrubInterval < controllerd.MinScrubInterval {
		// The schedule checks every tenth of it: not a ticker's 0.
		errs = append(errs, fmt.Errorf("--scrub-interval %v: give %v or more, or 0 for no scheduled scrubs", f.ScrubInterval, controllerd.MinScrubInterval))
	}
	return errors.Join(errs...)
}

// checkHolder says why holder, the value of --holder, cannot name an owner
// in etcd ("" takes the default).
func checkHolder(holder string) error {
	if holder == "" {
		return nil
	}
	if err := meta.CheckHolderName(holder); err != nil {
		return fmt.Errorf("--holder: %w", err)
	}
	return nil
}

// checkLeaseTTL says why ttl, the value of flag, cannot be the TTL of a
// volume's ownership lease (0 takes the default); why says how flag
// comes to be one ("": it is one).
func checkLeaseTTL(flag string, ttl time.Duration, why string) error {
	if ttl == 0 || ttl >= meta.MinOwnerTTL {
		return nil
	}
	if why != "" {
		why += ", and "
	}
	return fmt.Errorf("%s %v: %san ownership lease lasts at least %v: give %v or more (0: the default, %v)", flag, ttl, why, meta.MinOwnerTTL, meta.MinOwnerTTL, meta.DefaultOwnerTTL)
}

// checkNotNegative says why d, the value of the duration flag, is
// refused: it is negative; zero says what 0 means.
func checkNotNegative(flag string, d time.Duration, zero string) error {
	if d >= 0 {
		return nil
	}
	return fmt.Errorf("%s %v: negative: give 0 (%s) or more", flag, d, zero)
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

// checkHostPort says why addr, the value of a listener's flag, is not
// HOST:PORT ("" turns the listener off).
func checkHostPort(flag, addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if _, perr := strconv.ParseUint(port, 10, 16); perr != nil {
			err = fmt.Errorf("port %q is not a number from 0 to 65535", port)
		}
	}
	if err != nil {
		return fmt.Errorf("%s %q: want HOST:PORT: %w", flag, addr, err)
	}
	return nil
}
