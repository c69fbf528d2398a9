package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/internal/jsonout"
	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/meta"
)

// etcdPasswordEnv names the environment variable with the etcd password.
const etcdPasswordEnv = config.PasswordEnv

// openStore connects to the cluster named by the flags.
func openStore(ctx context.Context, g *globals, a *config.EtcdFlags) (*meta.Store, error) {
	tc, password, err := a.Client(os.Getenv(etcdPasswordEnv))
	if err != nil {
		return nil, err
	}
	etcdLog := slog.LevelError // its retry warnings say what the command's error says
	if g.logLevel == "debug" {
		etcdLog = slog.LevelDebug
	}
	return meta.Open(ctx, meta.Config{Endpoints: config.SplitList(g.etcd), EndpointsFrom: config.SourceOf(g.settings, "etcd.endpoints"),
		Cluster: a.Cluster, DialTimeout: a.Timeout,
		TLS: tc, Username: a.User, Password: password, Logger: meta.ZapToSlog(g.logger("etcd-client"), etcdLog)})
}

// withStore wraps a one-shot command body with opening and closing the
// store, all of it within --timeout (globals.bounded). A command checks
// its own arguments and flags in Args and PreRunE, which cobra runs before
// RunE, never in the body: withStore dials etcd first, and an unreachable
// etcd would hide the mistake behind its error.
func withStore(g *globals, a *config.EtcdFlags, fn func(cmd *cobra.Command, args []string, s *meta.Store) error) func(*cobra.Command, []string) error {
	body := serveWithStore(g, a, fn)
	return func(cmd *cobra.Command, args []string) error {
		return g.bounded(cmd, g.etcdPeer(), "--etcd", func() error { return body(cmd, args) })
	}
}

// serveWithStore is withStore for daemons and foreground map, which run
// until interrupted: no --timeout.
func serveWithStore(g *globals, a *config.EtcdFlags, fn func(cmd *cobra.Command, args []string, s *meta.Store) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		s, err := openStore(cmd.Context(), g, a)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := checkCluster(cmd, g, a, s); err != nil {
			return err
		}
		return fn(cmd, args, s)
	}
}

// annotationAnyCluster on a command lets it run for a cluster that is not
// initialized: `cluster init` creates it, daemons wait for it.
const annotationAnyCluster = "nvstripe/any-cluster"

// anyCluster marks c with annotationAnyCluster.
func anyCluster(c *cobra.Command) {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[annotationAnyCluster] = "yes"
}

// checkCluster fails a command for a cluster that does not exist (a
// misspelt --cluster would otherwise list nothing and succeed), naming the
// clusters that do and how to create one. The error wraps
// meta.ErrNotInitialized.
func checkCluster(cmd *cobra.Command, g *globals, a *config.EtcdFlags, s *meta.Store) error {
	if cmd.Annotations[annotationAnyCluster] != "" {
		return nil
	}
	_, err := s.Cluster(cmd.Context())
	if !errors.Is(err, meta.ErrNotInitialized) {
		return err
	}
	names, lerr := s.ClusterNames(cmd.Context())
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	create := "nvstripe cluster init"
	if a.Cluster != "default" {
		create += " --cluster " + a.Cluster
	}
	from := ""
	if src := config.SourceOf(g.settings, "cluster"); src != "" && src != "default" {
		from = " (from " + src + ")"
	}
	there := "no cluster is initialized there: create one with `" + create + "`"
	if len(names) > 0 {
		there = "clusters there: " + strings.Join(names, ", ") + " (choose one with --cluster NAME or NVSTRIPE_CLUSTER), or create it with `" + create + "`"
	}
	return noClusterError(fmt.Sprintf("cluster %q%s does not exist at %s; %s", a.Cluster, from, strings.Join(s.Endpoints(), ","), there))
}

// noClusterError is checkCluster's error: its own words, of the class
// meta.ErrNotInitialized.
type noClusterError string

func (e noClusterError) Error() string { return string(e) }
func (e noClusterError) Unwrap() error { return meta.ErrNotInitialized }

// metadataOnly marks commands that only read or write etcd records (no
// shard data) so that they skip the start-up codec self-test.
func metadataOnly(cmds ...*cobra.Command) {
	for _, c := range cmds {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[annotationNoSelfTest] = "metadata only"
	}
}

// wantJSON says whether cmd prints JSON: -o json, or its alias --json.
func wantJSON(cmd *cobra.Command) bool {
	o, j := cmd.Flags().Lookup("output"), cmd.Flags().Lookup("json")
	return (o != nil && o.Value.String() == "json") || (j != nil && j.Value.String() == "true")
}

// report prints v as JSON with -o json (jsonout), else the line format,
// args.
func report(cmd *cobra.Command, v any, format string, args ...any) error {
	if wantJSON(cmd) {
		return jsonout.Write(cmd.OutOrStdout(), v)
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), format+"\n", args...)
	return err
}

// writeOut prints v as JSON with -o json (jsonout), else with write, the
// library's rendering for people.
func writeOut[T any](cmd *cobra.Command, v T, write func(io.Writer, T) error) error {
	if wantJSON(cmd) {
		return jsonout.Write(cmd.OutOrStdout(), v)
	}
	return write(cmd.OutOrStdout(), v)
}

// readCmd is a command without arguments that reads from etcd (read) and
// prints what it read (writeOut): cluster info, host ls, ns ls.
func readCmd[T any](g *globals, a *config.EtcdFlags, use, short string, read func(*meta.Store, context.Context) (T, error), write func(io.Writer, T) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: withStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
			v, err := read(s, cmd.Context())
			if err != nil {
				return err
			}
			return writeOut(cmd, v, write)
		}),
	}
}

// dash stands in for an empty table cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newClusterCmd(g *globals) *cobra.Command {
	a := &config.EtcdFlags{}
	c := groupCmd("cluster", "Create, show and set the cluster record in etcd", newClusterInitCmd(g, a), newClusterInfoCmd(g, a),
		newClusterSetCmd(g, a))
	addEtcdFlags(g, c, a)
	metadataOnly(c.Commands()...)
	return c
}

func newClusterInitCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	var domain string
	slotSize := int64(meta.DefaultSlotSize)
	c := &cobra.Command{
		Use:   "init [--slot-size 1GiB] [--domain-label rack]",
		Short: "Initialize the cluster: a new id and the cluster-wide slot size",
		Long: "init creates the cluster record. The slot size (a power of two from 64KiB to 64GiB) is the\n" +
			"unit of placement and cannot change later; the default keeps a fully allocated cluster of\n" +
			"100 hosts x 16 x 7.68TB namespaces within what etcd holds well. --domain-label names the host\n" +
			"label that defines failure domains (default: each host is one).",
		Args: cobra.NoArgs,
		RunE: withStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
			rec, err := s.InitCluster(cmd.Context(), meta.InitOptions{SlotSize: slotSize, DomainLabel: domain})
			if err != nil {
				return err
			}
			return report(cmd, rec, "cluster %s initialized: id %s, slot size %s", rec.Name, rec.ID, units.FormatSize(rec.SlotSize))
		}),
	}
	anyCluster(c)
	c.Flags().Var(units.NewFlag(&slotSize), "slot-size", "slot size")
	c.Flags().StringVar(&domain, "domain-label", "", "host label naming failure domains, e.g. rack (default: hosts)")
	return c
}

func newClusterInfoCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	return readCmd(g, a, "info", "Show the cluster record", (*meta.Store).Cluster, meta.WriteCluster)
}

// textOut is where a command writes its text lines: stdout, or nowhere
// under -o json (the command then writes one JSON document).
func textOut(cmd *cobra.Command) io.Writer {
	if wantJSON(cmd) {
		return io.Discard
	}
	return cmd.OutOrStdout()
}
