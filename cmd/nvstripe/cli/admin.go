package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/controller/admin"
	"github.com/nvstripe/nvstripe/internal/jsonout"
	"github.com/nvstripe/nvstripe/meta"
)

// newAdminCmd is `nvstripe admin`. Its commands work on the records the
// controller acts on: directly in etcd, or with --controller ADDR through a
// controller's gRPC admin API (`nvstripe controller --api ADDR`); without
// either flag, through the local controller's socket when there is one.
func newAdminCmd(g *globals) *cobra.Command {
	a := &config.EtcdFlags{}
	f := &adminFlags{}
	subs := []*cobra.Command{newAdminStatusCmd(g, a, f), newAdminRebalanceCmd(g, a, f), newAdminDrainCmd(g, a, f), newAdminFailCmd(g, a, f), newAdminScrubCmd(g, a)}
	c := groupCmd("admin", "Cluster health, rebalance, drain and forced rebuilds (through the controller)", subs...)
	addEtcdFlags(g, c, a)
	c.PersistentFlags().StringVar(&f.controller, "controller", "", "a controller's admin API: unix:PATH, or HOST:PORT with --admin-tls-* "+
		"(default: "+admin.DefaultSocket+" if a controller serves it and --etcd is not given, else etcd directly)")
	f.tls.AddFlags(c.PersistentFlags(), "this client's")
	metadataOnly(subs...)
	return c
}

// adminFlags are the flags every admin command shares.
type adminFlags struct {
	controller string
	tls        admin.TLSFiles
	wait       bool // rebalance and drain --wait
}

// adminError makes a missing admin TLS file a usage error.
func adminError(err error) error {
	if errors.Is(err, admin.ErrTLSRequired) {
		return usageError{err}
	}
	return err
}

// waitFor prints the overall progress of a rebalance or drain until it is
// done, with --wait.
func waitFor(cmd *cobra.Command, f *adminFlags, ops admin.Ops, m admin.Measure) error {
	if !f.wait {
		return nil
	}
	return admin.WaitProgress(cmd.Context(), ops, 2*time.Second, m, func(p admin.Progress) error { return report(cmd, p, "%s", p) })
}

// waitHelp is the help of --wait's exit statuses.
const waitHelp = "\nWith --wait, exit status 3 when --timeout ran out first, 4 when the controller reports shards\n" +
	"it has nowhere to move (the blocker is printed), 0 once done."

// waitError is err, but a --wait that ended unfinished as itself: not as
// a peer that did not answer within --timeout.
func waitError(err error) error {
	var we *admin.WaitError
	if errors.As(err, &we) {
		return we
	}
	return err
}

// withAdmin runs fn with the admin operations: through the controller's
// gRPC API with --controller, else on etcd directly.
func withAdmin(g *globals, a *config.EtcdFlags, f *adminFlags, fn func(cmd *cobra.Command, args []string, ops admin.Ops) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if f.controller == "" && config.SourceOf(g.settings, "etcd.endpoints") == "default" {
			var stale bool
			if f.controller, stale = admin.LocalSocket(admin.DefaultSocket); stale {
				fmt.Fprintf(cmd.ErrOrStderr(), "admin: no controller answers on %s (a stale socket); using etcd directly\n", admin.DefaultSocket)
			}
		}
		if f.controller == "" {
			return waitError(withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
				return fn(cmd, args, admin.NewService(s))
			})(cmd, args))
		}
		c, err := admin.Dial(f.controller, f.tls)
		if err != nil {
			return adminError(err)
		}
		defer c.Close()
		return waitError(g.bounded(cmd, "controller at "+f.controller, "--controller", func() error { return fn(cmd, args, c) }))
	}
}

func newAdminStatusCmd(g *globals, a *config.EtcdFlags, f *adminFlags) *cobra.Command {
	var watch time.Duration
	status := withAdmin(g, a, f, func(cmd *cobra.Command, _ []string, ops admin.Ops) error {
		if watch <= 0 {
			return admin.Watch(cmd.Context(), ops, 0, func(st *admin.StatusReply) error {
				return writeOut(cmd, st, admin.WriteStatus)
			})
		}
		var prev *admin.StatusReply
		return admin.Watch(cmd.Context(), ops, watch, func(st *admin.StatusReply) error {
			defer func() { prev = st }()
			return writeRefresh(cmd, time.Now(), prev, st)
		})
	})
	c := &cobra.Command{
		Use:   "status [--watch 2s]",
		Short: "Cluster health: volumes (healthy, degraded by N, at risk), namespaces, tasks with progress",
		Long: "status prints the volumes' redundancy, the namespaces' states and use, and the controller's\n" +
			"tasks with progress. With --watch it prints it again every DURATION until interrupted, each\n" +
			"time under a line with the time and what changed since the last (volume health and owners,\n" +
			"namespace states, the number of tasks and blocked shards); with -o json, one JSON object per\n" +
			"line (NDJSON), its first field \"time\". --timeout then bounds starting, not watching.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if watch > 0 {
				g.timeout = 0 // watch until interrupted
			}
			return status(cmd, args)
		},
	}
	c.Flags().DurationVar(&watch, "watch", 0, "print the status again every DURATION until interrupted, under a timestamped header (-o json: one object per line)")
	return c
}

// writeRefresh prints one refresh of `admin status --watch`: a line of
// JSON with the time, or a header with the time and the changes since prev
// followed by the tables.
func writeRefresh(cmd *cobra.Command, at time.Time, prev, st *admin.StatusReply) error {
	out := cmd.OutOrStdout()
	if wantJSON(cmd) {
		return jsonout.WriteRecord(out, at, st)
	}
	if prev != nil {
		fmt.Fprintln(out)
	}
	if err := admin.WriteRefreshHeader(out, at, prev, st); err != nil {
		return err
	}
	return admin.WriteStatus(out, st)
}

func newAdminRebalanceCmd(g *globals, a *config.EtcdFlags, f *adminFlags) *cobra.Command {
	req := &admin.RebalanceRequest{}
	c := &cobra.Command{
		Use:   "rebalance [--threshold 0.1] [--apply [--wait]]",
		Short: "Print the moves that even out capacity use; --apply has the controller carry them out",
		Long: "rebalance plans moves of shards from fuller to emptier namespaces until the spread of\n" +
			"used/capacity between namespaces in service is at most --threshold, keeping the failure-domain\n" +
			"rule, and prints them with the bytes to copy and the spread before and after. With --apply it\n" +
			"records a rebalance task; the leading controller carries it out (re-planning as it goes) and\n" +
			"removes the task when done." + waitHelp,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if req.Threshold <= 0 || req.Threshold >= 1 {
				return usageError{fmt.Errorf("--threshold %g: want a fraction between 0 and 1", req.Threshold)}
			}
			return nil
		},
		RunE: withAdmin(g, a, f, func(cmd *cobra.Command, _ []string, ops admin.Ops) error {
			rep, err := ops.Rebalance(cmd.Context(), req)
			if err != nil {
				return err
			}
			if err := report(cmd, rep, "%s", admin.RebalanceText(req, rep)); err != nil || rep.Task == "" {
				return err
			}
			return waitFor(cmd, f, ops, admin.TaskMeasure(rep.Task))
		}),
	}
	c.Flags().BoolVar(&f.wait, "wait", false, "with --apply, print the overall progress until the task is done")
	c.Flags().BoolVar(&req.Apply, "apply", false, "record the task for the controller")
	c.Flags().Float64Var(&req.Threshold, "threshold", 0.1, "largest acceptable spread of used/capacity (0.1 = 10 points)")
	return c
}

func newAdminDrainCmd(g *globals, a *config.EtcdFlags, f *adminFlags) *cobra.Command {
	c := &cobra.Command{
		Use:   "drain HOST|NS [--wait]",
		Short: "Empty a host or a namespace: its shards are copied away by the controller",
		Long: "drain sets the namespace, or every in-service namespace of the host, to state draining: it\n" +
			"receives no new segments and the leading controller copies its shards elsewhere (each stays\n" +
			"readable where it is until its copy commits); once empty it is drained and 'ns rm' removes it.\n" +
			"`ns set-state NS in` undoes it. --wait ends when every namespace is drained. A drain whose\n" +
			"shards no failure domain could take is refused before anything changes." + waitHelp,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, a, hostsAndNamespaces),
		RunE: withAdmin(g, a, f, func(cmd *cobra.Command, args []string, ops admin.Ops) error {
			rep, err := ops.Drain(cmd.Context(), &admin.DrainRequest{Name: args[0]})
			if err != nil {
				return err
			}
			if err := report(cmd, rep, "%s", admin.DrainText(args[0], rep)); err != nil || len(rep.Namespaces) == 0 {
				return err
			}
			return waitFor(cmd, f, ops, admin.DrainMeasure(rep.Namespaces))
		}),
	}
	c.Flags().BoolVar(&f.wait, "wait", false, "print the overall progress until the namespaces hold no shard")
	return c
}

func newAdminFailCmd(g *globals, a *config.EtcdFlags, f *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:               "fail NS",
		Short:             "Mark a namespace failed: the controller rebuilds its shards elsewhere at once",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, a, namespaceIDs),
		RunE: withAdmin(g, a, f, func(cmd *cobra.Command, args []string, ops admin.Ops) error {
			if _, err := ops.Fail(cmd.Context(), &admin.FailRequest{Ns: args[0]}); err != nil {
				return err
			}
			return report(cmd, map[string]string{"namespace": args[0], "state": "failed"}, "namespace %s: failed; its shards will be rebuilt", args[0])
		}),
	}
}
