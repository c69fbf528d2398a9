package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/controller/admin"
	"github.com/nvstripe/nvstripe/meta"
)

// newAdminCmd is `nvstripe admin`. Its commands work on the records the
// controller acts on: directly in etcd, or with --controller ADDR through the
// leading controller's gRPC admin API (`nvstripe controller --api ADDR`).
func newAdminCmd(g *globals) *cobra.Command {
	a := &etcdAuth{}
	f := &adminFlags{}
	subs := []*cobra.Command{newAdminStatusCmd(g, a, f), newAdminRebalanceCmd(g, a, f), newAdminDrainCmd(g, a, f), newAdminFailCmd(g, a, f)}
	c := groupCmd("admin", "Cluster health, rebalance, drain and forced rebuilds (through the controller)", subs...)
	addEtcdFlags(c, a)
	c.PersistentFlags().StringVar(&f.controller, "controller", "", "HOST:PORT of a controller's admin API (default: work on etcd directly)")
	metadataOnly(subs...)
	return c
}

// adminFlags are the flags every admin command shares.
type adminFlags struct {
	controller string
}

// withAdmin runs fn with the admin operations: through the controller's
// gRPC API with --controller, else on etcd directly.
func withAdmin(g *globals, a *etcdAuth, f *adminFlags, fn func(cmd *cobra.Command, args []string, ops admin.Ops) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if f.controller == "" {
			return withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
				return fn(cmd, args, admin.NewService(s))
			})(cmd, args)
		}
		c, err := admin.Dial(f.controller)
		if err != nil {
			return err
		}
		defer c.Close()
		return fn(cmd, args, c)
	}
}

func newAdminStatusCmd(g *globals, a *etcdAuth, f *adminFlags) *cobra.Command {
	c := &cobra.Command{
		Use:   "status",
		Short: "Cluster health: volumes (healthy, degraded by N, at risk), namespaces, tasks with progress",
		Args:  cobra.NoArgs,
		RunE: withAdmin(g, a, f, func(cmd *cobra.Command, _ []string, ops admin.Ops) error {
			st, err := ops.Status(cmd.Context(), &admin.StatusRequest{})
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printProtoJSON(cmd.OutOrStdout(), st)
			}
			printStatus(cmd.OutOrStdout(), st)
			return nil
		}),
	}
	return c
}

func printStatus(w io.Writer, st *admin.StatusReply) {
	leader := st.Leader
	if leader == "" {
		leader = "none (no controller running)"
	}
	fmt.Fprintf(w, "controller leader: %s\n\n", leader)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VOLUME\tLAYOUT\tSEGMENTS\tHEALTH\tSTALE\tMOVING\tOWNER")
	for _, v := range st.Volumes {
		fmt.Fprintf(tw, "%s\t%d+%d\t%d\t%s\t%d\t%d\t%s\n", v.Volume, v.K, v.M, v.Segments, v.Health, v.Stale, v.Moving, dash(v.Owner))
	}
	fmt.Fprintln(tw, "\nNAMESPACE\tHOST\tSTATE\tUSED\tCAPACITY\t")
	for _, n := range st.Namespaces {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", n.Id, n.Host, n.State, fmtBytes(n.Used), fmtBytes(n.Capacity))
	}
	tw.Flush()
	if len(st.Blocked) > 0 {
		fmt.Fprintf(w, "\nblocked (no home for a shard):\n  %s\n", strings.Join(st.Blocked, "\n  "))
	}
	if len(st.Tasks) == 0 {
		fmt.Fprintln(w, "\nno tasks")
		return
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nTASK\tKIND\tSEGMENT\tMOVE\tHOLDER\tSTATE\tPROGRESS\tETA")
	for _, t := range st.Tasks {
		move := "-"
		if t.Segment != "" {
			move = fmt.Sprintf("shard %d %s -> %s", t.Shard, t.From, t.To)
		}
		eta := "-"
		if t.EtaSeconds > 0 || t.Done > 0 {
			eta = (time.Duration(t.EtaSeconds) * time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Id, t.Kind, dash(t.Segment), move, dash(t.Holder), t.State, progressBar(t.Done, t.Total), eta)
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// progressBar draws done of total as [#####-----] NN%.
func progressBar(done, total int64) string {
	const width = 20
	if total <= 0 {
		return "[" + strings.Repeat("-", width) + "]   0%"
	}
	done = min(max(done, 0), total)
	n := int(done * width / total)
	return fmt.Sprintf("[%s%s] %3d%%", strings.Repeat("#", n), strings.Repeat("-", width-n), done*100/total)
}

func newAdminRebalanceCmd(g *globals, a *etcdAuth, f *adminFlags) *cobra.Command {
	req := &admin.RebalanceRequest{}
	c := &cobra.Command{
		Use:   "rebalance [--threshold 0.1] [--apply]",
		Short: "Print the moves that even out capacity use; --apply has the controller carry them out",
		Long: "rebalance plans moves of shards from fuller to emptier namespaces until the spread of\n" +
			"used/capacity between namespaces in service is at most --threshold, keeping the failure-domain\n" +
			"rule, and prints them with the bytes to copy and the spread before and after. With --apply it\n" +
			"records a rebalance task; the leading controller carries it out (re-planning as it goes) and\n" +
			"removes the task when done.",
		Args: cobra.NoArgs,
		RunE: withAdmin(g, a, f, func(cmd *cobra.Command, _ []string, ops admin.Ops) error {
			if req.Threshold <= 0 || req.Threshold >= 1 {
				return usageError{fmt.Errorf("--threshold %g: want a fraction between 0 and 1", req.Threshold)}
			}
			rep, err := ops.Rebalance(cmd.Context(), req)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printProtoJSON(cmd.OutOrStdout(), rep)
			}
			printRebalance(cmd.OutOrStdout(), req, rep)
			return nil
		}),
	}
	c.Flags().BoolVar(&req.Apply, "apply", false, "record the task for the controller")
	c.Flags().Float64Var(&req.Threshold, "threshold", 0.1, "largest acceptable spread of used/capacity (0.1 = 10 points)")
	return c
}

func printRebalance(w io.Writer, req *admin.RebalanceRequest, rep *admin.RebalanceReply) {
	fmt.Fprintf(w, "spread before %.1f%%, after %.1f%% (threshold %.1f%%): %d moves, %s of shard data\n",
		rep.SpreadBefore*100, rep.SpreadAfter*100, req.Threshold*100, len(rep.Moves), fmtBytes(rep.Bytes))
	if len(rep.Moves) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SEGMENT\tSHARD\tFROM\tTO")
		for _, m := range rep.Moves {
			fmt.Fprintf(tw, "%s/%d\t%d\t%s\t%s\n", m.Volume, m.Segment, m.Shard, m.From, m.To)
		}
		tw.Flush()
	}
	switch {
	case rep.Task != "":
		fmt.Fprintf(w, "task %s recorded: the leading controller carries it out (nvstripe admin status)\n", rep.Task)
	case req.Apply:
		fmt.Fprintln(w, "nothing to do: no task recorded")
	}
}

func newAdminDrainCmd(g *globals, a *etcdAuth, f *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "drain HOST|NS",
		Short: "Empty a host or a namespace: its shards are copied away by the controller",
		Long: "drain sets the namespace, or every in-service namespace of the host, to state draining: it\n" +
			"receives no new segments and the leading controller copies its shards elsewhere (each stays\n" +
			"readable where it is until its copy commits). `ns set-state NS in` undoes it.",
		Args: cobra.ExactArgs(1),
		RunE: withAdmin(g, a, f, func(cmd *cobra.Command, args []string, ops admin.Ops) error {
			rep, err := ops.Drain(cmd.Context(), &admin.DrainRequest{Name: args[0]})
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printProtoJSON(cmd.OutOrStdout(), rep)
			}
			if len(rep.Namespaces) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "host %s has no namespace in service: nothing to drain\n", args[0])
			}
			for _, id := range rep.Namespaces {
				fmt.Fprintf(cmd.OutOrStdout(), "namespace %s: draining\n", id)
			}
			return nil
		}),
	}
}

func newAdminFailCmd(g *globals, a *etcdAuth, f *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "fail NS",
		Short: "Mark a namespace failed: the controller rebuilds its shards elsewhere at once",
		Args:  cobra.ExactArgs(1),
		RunE: withAdmin(g, a, f, func(cmd *cobra.Command, args []string, ops admin.Ops) error {
			if _, err := ops.Fail(cmd.Context(), &admin.FailRequest{Ns: args[0]}); err != nil {
				return err
			}
			return report(cmd, map[string]string{"namespace": args[0], "state": "failed"}, "namespace %s: failed; its shards will be rebuilt", args[0])
		}),
	}
}
