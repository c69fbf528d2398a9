package cli

import (
	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nbd"
	"github.com/nvstripe/nvstripe/volclient"
)

// newMapCmd is `nvstripe map`: serve a volume in the foreground, or ask the
// agent to.
func newMapCmd(g *globals) *cobra.Command {
	a := &config.EtcdFlags{}
	var f agent.MapFlags
	var sock string
	c := &cobra.Command{
		Use:   "map NAME [--nbd /dev/nbdN | --ublk | --nbd-listen ADDR | --fuse DIR] [--read-only] [--agent SOCKET]",
		Short: "Attach a volume as a kernel device (ublk where loaded, else nbd), or serve it over NBD or FUSE",
		Long: "map takes the volume's ownership lease and serves it: by default as a kernel device,\n" +
			"/dev/ublkbN where the ublk driver is loaded (/dev/ublk-control exists), else /dev/nbdN (the\n" +
			"one a dead map of the volume left, taken over, else the first free one), saying which;\n" +
			"--nbd /dev/nbdN or --ublk pick one,\n" +
			"--nbd-listen HOST:PORT (or unix:/PATH) as an NBD export named after the\n" +
			"volume, or --fuse DIR as the file DIR/NAME. Without --agent it serves in the foreground,\n" +
			"printing \"serving: DEVICE|URL\", until interrupted or unmapped, then flushes and releases\n" +
			"the volume. With --agent SOCKET the agent maps it (and keeps it mapped across its restarts)\n" +
			"and map returns at once.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, chose, err := f.Spec(args[0])
			if err != nil {
				return err
			}
			if sock != "" {
				return withAgent(cmd, g, sock, func(c *api.Client) error { return mapViaAgent(cmd, c, &f.Request, chose) })
			}
			ao := &f.Foreground.Agent // a foreground map's agent
			if ao.Namespaces.HostNQN, err = nodeHostNQN(ao.Namespaces.HostNQN); err != nil {
				return err
			}
			if err := f.CheckForeground(spec); err != nil {
				return err
			}
			return serveWithStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
				ao.Store, ao.Log = s, g.logger("map")
				return mapForeground(cmd, spec, f.Foreground, chose)
			})(cmd, args)
		},
	}
	a.AddFlags(c.PersistentFlags())
	fl := c.Flags()
	f.AddFlags(fl)
	fl.StringVar(&sock, "agent", "", "ask the agent on this unix socket to map it (default: serve in the foreground)")
	fl.StringVar(&f.Foreground.Agent.Namespaces.HostNQN, "host-nqn", "", hostNQNUsage+"; with --agent the agent's")
	fl.StringVar(&f.Foreground.Agent.Namespaces.HostTraddr, "host-traddr", "", volclient.HostTraddrUsage)
	return c
}

// mapViaAgent asks the agent to map req; chose is the kernel device
// CompleteRequest chose and why ("" when the flags named one).
func mapViaAgent(cmd *cobra.Command, c *api.Client, req *api.MapRequest, chose string) error {
	rep, err := c.Map(cmd.Context(), req)
	if err != nil {
		return err
	}
	return report(cmd, rep, "mapped: %s (epoch %d)%s", rep.Mapping.GetUrl(), rep.Mapping.GetEpoch(), because(chose))
}

// because renders the frontend choice after a device ("" when none).
func because(chose string) string {
	if chose == "" {
		return ""
	}
	return " (" + chose + ")"
}

// mapForeground serves spec until the context ends or the lease is lost.
func mapForeground(cmd *cobra.Command, spec agent.Spec, o agent.ForegroundOptions, chose string) error {
	say := func(what, note string) func(string) {
		return func(url string) {
			report(cmd, map[string]string{"volume": spec.Volume, what: url, "frontend": string(spec.Via)}, "%s: %s%s", what, url, note)
		}
	}
	o.Serving, o.Unmapping = say("serving", because(chose)), say("unmapping", "")
	return agent.ServeForeground(cmd.Context(), spec, o)
}

// withAgent runs fn with a client of the agent on sock, within --timeout.
func withAgent(cmd *cobra.Command, g *globals, sock string, fn func(*api.Client) error) error {
	c, err := api.Dial(sock)
	if err != nil {
		return err
	}
	defer c.Close()
	return g.bounded(cmd, "the agent on "+sock, "--agent", func() error { return fn(c) })
}

func newUnmapCmd(g *globals) *cobra.Command {
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
			if dev := agent.UnmapDevice(args[0], sock, cmd.Flags().Changed("agent")); dev != "" {
				if err := nbd.Detach(cmd.Context(), dev); err != nil {
					return err
				}
				return report(cmd, map[string]string{"unmapped": dev}, "unmapped %s", dev)
			}
			return withAgent(cmd, g, sock, func(c *api.Client) error {
				if _, err := c.Unmap(cmd.Context(), &api.UnmapRequest{Volume: args[0]}); err != nil {
					return err
				}
				return report(cmd, map[string]string{"unmapped": args[0]}, "unmapped %s", args[0])
			})
		},
	}
	c.Flags().StringVar(&sock, "agent", agent.DefaultSocket, "unix socket of the agent")
	metadataOnly(c)
	return c
}
