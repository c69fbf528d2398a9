package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/nvmeof/target"
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
	fl.StringVar(&f.control, "control", "", "serve the HTTP control API on this address (e.g. 127.0.0.1:4480); loopback only without --control-token-file")
	fl.StringVar(&f.hostKeys, "host-keys", "", "file of hosts that must authenticate (DH-HMAC-CHAP): lines 'HOSTNQN DHHC-1:... [CTRL-DHHC-1:...]'")
	fl.StringVar(&f.ctlToken, "control-token-file", "", "file holding a bearer token every control API request must carry")
	fl.StringVar(&f.host, "host", "", "this host's name in etcd (nvstripe host add), gossiped with --gossip")
	fl.StringArrayVar(&f.gossip.labels, "label", nil, "failure-domain label KEY=VALUE gossiped with --gossip, repeatable")
	f.gossip.register(fl)
	return c
}

// runTargetServe serves the namespaces until the command's context ends.
func runTargetServe(cmd *cobra.Command, g *globals, f *targetServeFlags) error {
	if _, err := f.gossip.targetConfig(f.host, nil); err != nil {
		return err // before anything listens
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	defer target.CloseNamespaces(cfg.Subsystems[0].Namespaces)
	cfg.Logf = lineLogger(cmd.ErrOrStderr())
	t, err := target.New(cfg)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if err := t.Start(ctx); err != nil {
		return err
	}
	defer t.Close()
	var ctlAddr string
	if f.control != "" {
		token, err := readSecretFile("--control-token-file", f.ctlToken)
		if err != nil {
			return err
		}
		addr, stop, err := t.ServeControl(f.control, token)
		if err != nil {
			return err
		}
		defer stop()
		ctlAddr = addr
	}
	var names []string
	for _, ns := range cfg.Subsystems[0].Namespaces {
		names = append(names, ns.Name)
	}
	leave, gossipAddr, err := startTargetGossip(cmd, g, &f.auth, &f.gossip, f.host, names)
	if err != nil {
		return err
	}
	defer leave()
	printServing(cmd.OutOrStdout(), t, &cfg, ctlAddr, gossipAddr)
	<-ctx.Done()
	return nil
}

// config turns the flags into the target's configuration, with the
// namespace files open.
func (f *targetServeFlags) config() (target.Config, error) {
	var cfg target.Config
	if f.dir == "" || f.nqn == "" || len(f.ns) == 0 {
		return cfg, usageError{errors.New("--dir, --nqn and at least one --ns are required")}
	}
	sub := target.SubsystemConfig{NQN: f.nqn}
	if f.hostKeys != "" {
		var err error
		if sub.HostKeys, err = readHostKeys(f.hostKeys); err != nil {
			return cfg, err
		}
	}
	if len(f.allowHosts) == 0 && len(sub.HostKeys) == 0 {
		return cfg, usageError{errors.New("no --allow-host or --host-keys: name the host NQNs, or 'any' to allow every host")}
	}
	for _, h := range f.allowHosts {
		if h == "any" {
			sub.AllowAnyHost = true
		} else {
			sub.AllowedHosts = append(sub.AllowedHosts, h)
		}
	}
	nss, err := f.fileNamespaces()
	if err != nil {
		return cfg, err
	}
	if sub.Namespaces, err = target.OpenFileNamespaces(f.dir, int(f.blockSize), nss); err != nil {
		return cfg, err
	}
	cfg.Subsystems = []target.SubsystemConfig{sub}
	for _, a := range strings.Split(f.listen, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.Listeners = append(cfg.Listeners, target.ListenerConfig{Address: a})
		}
	}
	return cfg, nil
}

// fileNamespaces parses --ns and --ana-group.
func (f *targetServeFlags) fileNamespaces() ([]target.FileNamespace, error) {
	groups, err := parseANAGroups(f.anaGroups)
	if err != nil {
		return nil, err
	}
	var out []target.FileNamespace
	for _, spec := range f.ns {
		name, size, err := parseNSSpec(spec)
		if err != nil {
			return nil, err
		}
		out = append(out, target.FileNamespace{Name: name, Size: size, ANAGroup: groups[name]})
		delete(groups, name)
	}
	for name := range groups {
		return nil, usageError{fmt.Errorf("--ana-group names unknown namespace %q", name)}
	}
	return out, nil
}

func parseNSSpec(spec string) (string, int64, error) {
	name, sz, ok := strings.Cut(spec, ":")
	if !ok || name == "" || strings.ContainsAny(name, "/\\") {
		return "", 0, usageError{fmt.Errorf("--ns %q: want NAME:SIZE", spec)}
	}
	size, err := units.ParseSize(sz)
	if err != nil {
		return "", 0, usageError{fmt.Errorf("--ns %q: %w", spec, err)}
	}
	if size <= 0 {
		return "", 0, usageError{fmt.Errorf("--ns %q: the size must be positive", spec)}
	}
	return name, size, nil
}

func parseANAGroups(specs []string) (map[string]uint32, error) {
	out := map[string]uint32{}
	for _, s := range specs {
		name, g, ok := strings.Cut(s, ":")
		n, err := strconv.ParseUint(g, 10, 32)
		if !ok || err != nil || n == 0 {
			return nil, usageError{fmt.Errorf("--ana-group %q: want NAME:GROUP with GROUP >= 1", s)}
		}
		out[name] = uint32(n)
	}
	return out, nil
}

func printServing(w io.Writer, t *target.Target, cfg *target.Config, ctl, gossip string) {
	s := cfg.Subsystems[0]
	fmt.Fprintf(w, "subsystem %s\n", s.NQN)
	for i, a := range t.Addrs() {
		fmt.Fprintf(w, "listener %d: %s\n", i, a)
	}
	for _, ns := range s.Namespaces {
		u, _ := target.DeriveNamespaceIDs(s.NQN, ns.NSID, ns.Name)
		fmt.Fprintf(w, "ns %d: %s size %s uuid %x ana-group %d\n", ns.NSID, ns.Name, fmtBytes(ns.Device.Size()), u, max(ns.ANAGroup, 1))
	}
	if ctl != "" {
		fmt.Fprintf(w, "control: http://%s\n", ctl)
	}
	if gossip != "" {
		fmt.Fprintf(w, "gossip: %s\n", gossip)
	}
	fmt.Fprintln(w, "ready")
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
				for _, e := range es {
					fmt.Fprintf(cmd.OutOrStdout(), "listener %d %s group %d %s\n", e.Listener, e.Address, e.Group, e.State)
				}
				return err
			}
			if err := cc.SetANAState(cmd.Context(), listener, group, state); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "listener %s group %d: %s\n", listener, group, state)
			return nil
		},
	}
	c.Flags().StringVar(&control, "control", "", "address of the target's control API (its --control)")
	c.Flags().StringVar(&tokenFile, "control-token-file", "", "file holding the target's control token (its --control-token-file)")
	c.Flags().StringVar(&listener, "listener", "0", "listener index or address")
	c.Flags().Uint32Var(&group, "group", 1, "ANA group ID")
	c.Flags().StringVar(&state, "state", "", "new state; empty lists the states")
	return c
}
