package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nbd"
	"github.com/nvstripe/nvstripe/volclient"
)

// newMapCmd is `nvstripe map`: serve a volume in the foreground, or ask the
// agent to.
func newMapCmd(g *globals) *cobra.Command {
	a := &etcdAuth{}
	var req api.MapRequest
	var sock, holder, hostNQN string
	var dh dhchapFlags
	var nt nbdTLSFlags
	wait := true
	c := &cobra.Command{
		Use:   "map NAME [--nbd /dev/nbdN | --ublk | --nbd-listen ADDR | --fuse DIR] [--read-only] [--agent SOCKET]",
		Short: "Attach a volume as a kernel nbd device (default), or serve it over ublk, NBD or FUSE",
		Long: "map takes the volume's ownership lease and serves it: by default as a kernel device\n" +
			"/dev/nbdN (the one --nbd names, else the one a dead map of the volume left, taken over, else\n" +
			"the first free one), --ublk as /dev/ublkbN through the kernel's ublk driver (ublk_drv),\n" +
			"--nbd-listen HOST:PORT (or unix:/PATH) as an NBD export named after the\n" +
			"volume, or --fuse DIR as the file DIR/NAME. Without --agent it serves in the foreground,\n" +
			"printing \"serving: DEVICE|URL\", until interrupted or unmapped, then flushes and releases\n" +
			"the volume. With --agent SOCKET the agent maps it (and keeps it mapped across its restarts)\n" +
			"and map returns at once.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Volume = args[0]
			if err := pickDevice(&req); err != nil {
				return err
			}
			if req.FuseDir != "" {
				abs, err := filepath.Abs(req.FuseDir)
				if err != nil {
					return err
				}
				req.FuseDir = abs
			}
			spec, err := agent.SpecOf(&req)
			if err != nil {
				return usageError{err}
			}
			if sock != "" {
				return withAgent(sock, func(c *api.Client) error { return mapViaAgent(cmd, c, &req) })
			}
			if err := agent.CheckSpec(spec); err != nil {
				return err
			}
			if spec.Via == agent.ViaNBDDevice {
				if err := nbd.CheckAttachable(spec.Where, spec.Volume); err != nil {
					return err
				}
			}
			nso := volclient.NamespaceOptions{}
			if nso.HostNQN, err = nodeHostNQN(hostNQN); err != nil {
				return err
			}
			if nso.DHCHAPSecret, nso.DHCHAPCtrlSecret, err = dh.load(); err != nil {
				return err
			}
			tc, requireTLS, err := nt.config()
			if err != nil {
				return err
			}
			if tc != nil && spec.Via != agent.ViaNBDListen {
				return usageError{fmt.Errorf("--tls is for --nbd-listen exports (kernel nbd devices have no TLS)")}
			}
			return withStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
				return mapForeground(cmd, s, spec, agent.Options{Holder: holder, Namespaces: nso, NBDTLS: tc, NBDRequireTLS: requireTLS}, wait)
			})(cmd, args)
		},
	}
	addEtcdFlags(c, a)
	fl := c.Flags()
	fl.StringVar(&req.NbdListen, "nbd-listen", "", "serve over NBD on HOST:PORT or unix:/PATH")
	fl.StringVar(&req.NbdDevice, "nbd", "", "attach to the kernel nbd device /dev/nbdN (default: the first free one)")
	fl.BoolVar(&req.Ublk, "ublk", false, "serve as /dev/ublkbN through the kernel's ublk driver")
	fl.StringVar(&req.FuseDir, "fuse", "", "show the volume as the file DIR/NAME in a FUSE mount")
	fl.BoolVar(&req.ReadOnly, "read-only", false, "map read-only (shared read-only lease)")
	fl.StringVar(&sock, "agent", "", "ask the agent on this unix socket to map it (default: serve in the foreground)")
	fl.StringVar(&holder, "holder", "", "owner name in etcd when serving in the foreground (default map.HOSTNAME, or map.node-ID on hosts without a valid one)")
	fl.StringVar(&hostNQN, "host-nqn", "", hostNQNUsage+"; with --agent the agent's")
	dh.register(fl)
	nt.register(fl)
	fl.BoolVar(&wait, "wait", true, "print a kernel device only once it has its size")
	return c
}

// pickDevice makes a request that names no way to serve attach a kernel
// nbd device: the one its volume had when its serving process died, else
// the first free one.
func pickDevice(req *api.MapRequest) error {
	if req.NbdListen != "" || req.NbdDevice != "" || req.Ublk || req.FuseDir != "" {
		return nil
	}
	d, err := nbd.PickDevice(req.Volume)
	if err != nil {
		return fmt.Errorf("map %s: %w", req.Volume, err)
	}
	req.NbdDevice = d.Path
	return nil
}

func mapViaAgent(cmd *cobra.Command, c *api.Client, req *api.MapRequest) error {
	rep, err := c.Map(cmd.Context(), req)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "mapped: %s (epoch %d)\n", rep.Mapping.GetUrl(), rep.Mapping.GetEpoch())
	return nil
}

// mapForeground serves spec until the context ends or the lease is lost.
func mapForeground(cmd *cobra.Command, s *meta.Store, spec agent.Spec, o agent.Options, wait bool) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	if o.Holder == "" {
		o.Holder = meta.DefaultHolder("map")
	}
	o.Store, o.Logf = s, lineLogger(cmd.ErrOrStderr())
	ag, err := agent.New(ctx, o)
	if err != nil {
		return err
	}
	m, err := ag.Map(ctx, spec)
	if err != nil {
		ag.Close(context.WithoutCancel(ctx))
		return err
	}
	if spec.Via == agent.ViaNBDDevice && wait {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = nbd.WaitSize(wctx, m.Url)
		cancel()
	}
	if err == nil {
		fmt.Fprintf(out, "serving: %s\n", m.Url)
		err = ag.WaitFenced(ctx, spec.Volume)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	fmt.Fprintf(out, "unmapping %s\n", spec.Volume)
	return errors.Join(err, ag.Unmap(sctx, spec.Volume), ag.Close(sctx))
}

// withAgent runs fn with a client of the agent on sock.
func withAgent(sock string, fn func(*api.Client) error) error {
	c, err := api.Dial(sock)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

func newUnmapCmd(*globals) *cobra.Command {
	var sock string
	c := &cobra.Command{
		Use:   "unmap NAME|/dev/nbdN [--agent SOCKET]",
		Short: "Stop serving a volume: detach its kernel nbd device, or ask the agent to unmap it",
		Long: "unmap /dev/nbdN, or a volume attached to a kernel nbd device by `nvstripe map`, stops the map\n" +
			"process that serves it (it flushes the volume, disconnects the device and releases its lease;\n" +
			"a device left by a dead process is disconnected) and returns once the device has size 0. A\n" +
			"mounted device is refused. Otherwise the agent on --agent unmaps the volume.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dev := args[0]
			if !strings.HasPrefix(dev, "/dev/") && !cmd.Flags().Changed("agent") {
				if d, err := nbd.DeviceOf(dev); err == nil && (d.ServedByMap() || !agentRunning(sock)) {
					dev = d.Path
				}
			}
			if strings.HasPrefix(dev, "/dev/") {
				if err := nbd.Detach(cmd.Context(), dev); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "unmapped %s\n", dev)
				return nil
			}
			return withAgent(sock, func(c *api.Client) error {
				if _, err := c.Unmap(cmd.Context(), &api.UnmapRequest{Volume: args[0]}); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "unmapped %s\n", args[0])
				return nil
			})
		},
	}
	c.Flags().StringVar(&sock, "agent", agent.DefaultSocket, "unix socket of the agent")
	metadataOnly(c)
	return c
}

// agentRunning says whether an agent listens on sock.
func agentRunning(sock string) bool {
	fi, err := os.Stat(sock)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

func newLsCmd(*globals) *cobra.Command {
	var sock string
	var asJSON bool
	c := &cobra.Command{
		Use:   "ls [--agent SOCKET] [--json]",
		Short: "List the volumes the agent maps, with their state and IO counters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withAgent(sock, func(c *api.Client) error {
				l, err := c.List(cmd.Context(), &api.ListRequest{})
				if err != nil {
					return err
				}
				if asJSON {
					return printProtoJSONList(cmd.OutOrStdout(), l.Mappings)
				}
				printMappings(cmd, l.Mappings)
				return nil
			})
		},
	}
	c.Flags().StringVar(&sock, "agent", agent.DefaultSocket, "unix socket of the agent")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	metadataOnly(c)
	return c
}

func printMappings(cmd *cobra.Command, ms []*api.Mapping) {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "VOLUME\tSTATE\tURL\tEPOCH\tREAD\tWRITTEN\tERRORS\tDEGRADED\tNOTE")
	for _, m := range ms {
		url := m.Url
		if url == "" {
			url = m.Via + " " + m.Where
		}
		if m.ReadOnly {
			url += " (ro)"
		}
		s := m.GetStats()
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\n", m.Volume, m.State, url, m.Epoch,
			fmtBytes(s.GetReadBytes()), fmtBytes(s.GetWriteBytes()), s.GetErrors(), s.GetDegraded(), m.Error)
	}
	w.Flush()
}
