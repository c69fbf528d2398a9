package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/meta"
)

// newMapCmd is `nvstripe map`: serve a volume in the foreground, or ask the
// agent to.
func newMapCmd(g *globals) *cobra.Command {
	a := &etcdAuth{}
	var req api.MapRequest
	var sock, holder string
	c := &cobra.Command{
		Use:   "map NAME (--nbd-listen ADDR | --nbd /dev/nbdN | --ublk | --fuse DIR) [--read-only] [--agent SOCKET]",
		Short: "Serve a volume over NBD, ublk or FUSE, in the foreground or through the agent",
		Long: "map takes the volume's ownership lease and serves it: --nbd-listen HOST:PORT (or unix:/PATH)\n" +
			"as an NBD export named after the volume, --nbd /dev/nbdN through the kernel's nbd driver, --ublk\n" +
			"as /dev/ublkbN through the kernel's ublk driver (ublk_drv, Linux 6.0+), or\n" +
			"--fuse DIR as the file DIR/NAME. Without --agent it serves in the foreground, printing\n" +
			"\"serving: URL\", until interrupted, then flushes and releases the volume. With --agent SOCKET\n" +
			"the agent maps it (and keeps it mapped across its restarts) and map returns at once.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Volume = args[0]
			if req.FUSEDir != "" {
				abs, err := filepath.Abs(req.FUSEDir)
				if err != nil {
					return err
				}
				req.FUSEDir = abs
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
			return withStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
				return mapForeground(cmd, s, spec, holder)
			})(cmd, args)
		},
	}
	addEtcdFlags(c, a)
	fl := c.Flags()
	fl.StringVar(&req.NBDListen, "nbd-listen", "", "serve over NBD on HOST:PORT or unix:/PATH")
	fl.StringVar(&req.NBDDevice, "nbd", "", "attach to the kernel nbd device /dev/nbdN")
	fl.BoolVar(&req.Ublk, "ublk", false, "serve as /dev/ublkbN through the kernel's ublk driver")
	fl.StringVar(&req.FUSEDir, "fuse", "", "show the volume as the file DIR/NAME in a FUSE mount")
	fl.BoolVar(&req.ReadOnly, "read-only", false, "map read-only (shared read-only lease)")
	fl.StringVar(&sock, "agent", "", "ask the agent on this unix socket to map it (default: serve in the foreground)")
	fl.StringVar(&holder, "holder", "", "owner name in etcd when serving in the foreground (default map.HOSTNAME)")
	return c
}

func mapViaAgent(cmd *cobra.Command, c *api.Client, req *api.MapRequest) error {
	rep, err := c.Map(cmd.Context(), req)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "mapped: %s (epoch %d)\n", rep.Mapping.URL, rep.Mapping.Epoch)
	return nil
}

// mapForeground serves spec until the context ends or the lease is lost.
func mapForeground(cmd *cobra.Command, s *meta.Store, spec agent.Spec, holder string) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	if holder == "" {
		host, _ := os.Hostname()
		holder = "map." + host
	}
	ag, err := agent.New(ctx, agent.Options{Store: s, Holder: holder, Logf: lineLogger(cmd.ErrOrStderr())})
	if err != nil {
		return err
	}
	m, err := ag.Map(ctx, spec)
	if err != nil {
		ag.Close(context.WithoutCancel(ctx))
		return err
	}
	fmt.Fprintf(out, "serving: %s\n", m.URL)
	err = waitFenced(ctx, ag, spec.Volume)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	fmt.Fprintf(out, "unmapping %s\n", spec.Volume)
	return errors.Join(err, ag.Unmap(sctx, spec.Volume), ag.Close(sctx))
}

// waitFenced waits until ctx ends (nil) or the mapping is fenced (an error).
func waitFenced(ctx context.Context, ag *agent.Agent, name string) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for _, m := range ag.List() {
			if m.Volume == name && m.State == api.StateFenced {
				return fmt.Errorf("volume %s fenced, no longer served: %s", name, m.Error)
			}
		}
	}
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
		Use:   "unmap NAME [--agent SOCKET]",
		Short: "Ask the agent to stop serving a volume, flush it and release its lease",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
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
					return printJSON(cmd.OutOrStdout(), l.Mappings)
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

func printMappings(cmd *cobra.Command, ms []api.Mapping) {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "VOLUME\tSTATE\tURL\tEPOCH\tREAD\tWRITTEN\tERRORS\tDEGRADED\tNOTE")
	for _, m := range ms {
		url := m.URL
		if url == "" {
			url = m.Via + " " + m.Where
		}
		if m.ReadOnly {
			url += " (ro)"
		}
		s := m.Stats
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\n", m.Volume, m.State, url, m.Epoch,
			fmtBytes(s.ReadBytes), fmtBytes(s.WriteBytes), s.Errors, s.Degraded, m.Error)
	}
	w.Flush()
}
