package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/meta"
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
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, a, volumeNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, chose, err := f.Spec(args[0])
			if err != nil {
				return err
			}
			if sock != "" {
				return withAgent(cmd, g, sock, func(c *api.Client) error { return mapViaAgent(cmd, c, &f.Request, chose) })
			}
			ao := &f.Foreground.Agent // a foreground map's agent
			if err := errors.Join(checkHolder(ao.Holder), checkLeaseTTL("--lease-ttl", ao.LeaseTTL, "")); err != nil {
				return config.Usage(err)
			}
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
	addEtcdFlags(g, c, a)
	fl := c.Flags()
	f.AddFlags(fl)
	fl.StringVar(&sock, "agent", "", "ask the agent on this unix socket to map it (default: serve in the foreground)")
	fl.StringVar(&f.Foreground.Agent.Namespaces.HostNQN, "host-nqn", "", hostNQNUsage+"; with --agent the agent's")
	fl.StringVar(&f.Foreground.Agent.Namespaces.HostTraddr, "host-traddr", "", volclient.HostTraddrUsage)
	return withPprof(g, c, "map")
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

// newUnmapCmd is `nvstripe unmap`: ask whoever serves a mapping on this
// node to unmap it.
func newUnmapCmd(g *globals) *cobra.Command {
	var sock, dir string
	c := &cobra.Command{
		Use:   "unmap VOLUME|DEVICE [--agent SOCKET] [--map-sockets DIR]",
		Short: "Stop serving a volume on this node: flush it, detach its device, release its lease",
		Long: "unmap finds the mapping of VOLUME, or of DEVICE (/dev/nbdN, /dev/ublkbN, an NBD URL or a FUSE\n" +
			"file, as `nvstripe ls` shows it), among those registered on this node: each foreground\n" +
			"`nvstripe map` registers its mapping on DIR/VOLUME.sock, the agent serves its own on --agent.\n" +
			"It asks that process to unmap it; the process flushes the volume, detaches the device and\n" +
			"releases the lease, then unmap returns (a foreground map then exits). A mounted device is\n" +
			"refused and stays mapped. A /dev/nbdN whose serving process died is disconnected. A name\n" +
			"nothing serves is \"not mapped\", exit status 1.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeMapped(&sock, &dir),
		RunE: func(cmd *cobra.Command, args []string) error {
			var u agent.Unmapped
			err := g.bounded(cmd, "the process serving "+args[0], "--agent", func() (err error) {
				u, err = agent.Unmap(cmd.Context(), args[0], sock, dir, cmd.Flags().Changed("agent"))
				return err
			})
			if err != nil {
				return err
			}
			return report(cmd, u, "%s", u)
		},
	}
	c.Flags().StringVar(&sock, "agent", agent.DefaultSocket, "unix socket of the agent")
	c.Flags().StringVar(&dir, "map-sockets", agent.DefaultMapSocketDir, "directory where foreground maps register")
	metadataOnly(c)
	return c
}
