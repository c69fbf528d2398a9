package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/placement"
)

// The admin commands read and write etcd directly (the records the
// controller acts on); there is no admin RPC server yet.
func newAdminCmd(g *globals) *cobra.Command {
	a := &etcdAuth{}
	subs := []*cobra.Command{newAdminStatusCmd(g, a), newAdminRebalanceCmd(g, a), newAdminDrainCmd(g, a), newAdminFailCmd(g, a)}
	c := groupCmd("admin", "Cluster health, rebalance, drain and forced rebuilds (through the controller)", subs...)
	addEtcdFlags(c, a)
	metadataOnly(subs...)
	return c
}

// statusJSON is `admin status --json`.
type statusJSON struct {
	Leader     string       `json:"leader,omitempty"`
	Volumes    []volumeJSON `json:"volumes"`
	Namespaces []nsJSON     `json:"namespaces"`
	Tasks      []taskJSON   `json:"tasks"`
	// Blocked lists shards that need a new home and have none (what
	// Decide reports as Blocked on this snapshot).
	Blocked []string `json:"blocked,omitempty"`
}

type volumeJSON struct {
	controller.VolumeHealth
	Health string `json:"health"`
	Owner  string `json:"owner,omitempty"`
}

type nsJSON struct {
	ID       string `json:"id"`
	Host     string `json:"host"`
	State    string `json:"state"`
	Used     int64  `json:"used"`
	Capacity int64  `json:"capacity"`
}

type taskJSON struct {
	ID         string  `json:"id"`
	Kind       string  `json:"kind"`
	Segment    string  `json:"segment,omitempty"`
	Shard      int     `json:"shard"`
	From       string  `json:"from,omitempty"`
	To         string  `json:"to,omitempty"`
	Holder     string  `json:"holder,omitempty"`
	State      string  `json:"state"`
	Done       int64   `json:"done"`
	Total      int64   `json:"total"`
	ETASeconds float64 `json:"eta_seconds,omitempty"`
	Error      string  `json:"error,omitempty"`
}

func newAdminStatusCmd(g *globals, a *etcdAuth) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status [--json]",
		Short: "Cluster health: volumes (healthy, degraded by N, at risk), namespaces, tasks with progress",
		Args:  cobra.NoArgs,
		RunE: withStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
			snap, err := controller.LoadSnapshot(cmd.Context(), s)
			if err != nil {
				return err
			}
			st := buildStatus(snap, time.Now())
			if cl, err := s.Cluster(cmd.Context()); err == nil {
				st.Blocked = blocked(snap, cl.DomainLabel)
			}
			if st.Leader, err = s.Leader(cmd.Context()); err != nil && !errors.Is(err, meta.ErrNotFound) {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), st)
			}
			printStatus(cmd.OutOrStdout(), st)
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func buildStatus(snap *controller.Snapshot, now time.Time) statusJSON {
	st := statusJSON{Volumes: []volumeJSON{}, Namespaces: []nsJSON{}, Tasks: []taskJSON{}}
	for _, h := range snap.Health() {
		st.Volumes = append(st.Volumes, volumeJSON{VolumeHealth: h, Health: h.Status(), Owner: snap.Owners[h.Volume]})
	}
	for _, n := range snap.State.Namespaces {
		st.Namespaces = append(st.Namespaces, nsJSON{ID: n.ID, Host: n.Host, State: n.State.String(), Used: n.Used, Capacity: n.Capacity})
	}
	for _, r := range snap.Tasks {
		t := taskJSON{ID: r.ID, Kind: r.Kind, Holder: r.Holder, State: r.State, Done: r.Done, Total: r.Total, Error: r.Error}
		if mt, ok, err := controller.ParseMoveTask(r); ok && err == nil {
			t.Kind, t.Segment, t.Shard, t.From, t.To = mt.Kind.String(), mt.Segment.String(), mt.Shard, mt.From, mt.To
			if eta, ok := controller.ETA(mt.Started, now, mt.Done, mt.Total); ok {
				t.ETASeconds = eta.Seconds()
			}
		}
		st.Tasks = append(st.Tasks, t)
	}
	return st
}

// blocked runs the controller's decision on snap and returns what it
// reports as Blocked.
func blocked(snap *controller.Snapshot, domainLabel string) []string {
	acts, err := controller.Decide(snap.State, time.Now(), controller.Config{DomainLabel: domainLabel})
	if err != nil {
		return []string{"cannot decide: " + err.Error()}
	}
	var out []string
	for _, a := range acts {
		if b, ok := a.(controller.Blocked); ok {
			out = append(out, fmt.Sprintf("%s shard %d: %v", b.Segment, b.Shard, b.Err))
		}
	}
	return out
}

func printStatus(w io.Writer, st statusJSON) {
	leader := st.Leader
	if leader == "" {
		leader = "none (no controller running)"
	}
	fmt.Fprintf(w, "controller leader: %s\n\n", leader)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VOLUME\tLAYOUT\tSEGMENTS\tHEALTH\tMOVING\tOWNER")
	for _, v := range st.Volumes {
		fmt.Fprintf(tw, "%s\t%d+%d\t%d\t%s\t%d\t%s\n", v.Volume, v.K, v.M, v.Segments, v.Health, v.Moving, dash(v.Owner))
	}
	fmt.Fprintln(tw, "\nNAMESPACE\tHOST\tSTATE\tUSED\tCAPACITY\t")
	for _, n := range st.Namespaces {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t\n", n.ID, n.Host, n.State, n.Used, n.Capacity)
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
		if t.ETASeconds > 0 || t.Done > 0 {
			eta = (time.Duration(t.ETASeconds) * time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, dash(t.Segment), move, dash(t.Holder), t.State, progressBar(t.Done, t.Total), eta)
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

func newAdminRebalanceCmd(g *globals, a *etcdAuth) *cobra.Command {
	var apply bool
	var threshold float64
	c := &cobra.Command{
		Use:   "rebalance [--threshold 0.1] [--apply]",
		Short: "Print the moves that even out capacity use; --apply has the controller carry them out",
		Long: "rebalance plans moves of shards from fuller to emptier namespaces until the spread of\n" +
			"used/capacity between namespaces in service is at most --threshold, keeping the failure-domain\n" +
			"rule, and prints them with the bytes to copy and the spread before and after. With --apply it\n" +
			"records a rebalance task; the leading controller carries it out (re-planning as it goes) and\n" +
			"removes the task when done.",
		Args: cobra.NoArgs,
		RunE: withStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
			if threshold <= 0 || threshold >= 1 {
				return usageError{fmt.Errorf("--threshold %g: want a fraction between 0 and 1", threshold)}
			}
			return rebalance(cmd, s, threshold, apply)
		}),
	}
	c.Flags().BoolVar(&apply, "apply", false, "record the task for the controller")
	c.Flags().Float64Var(&threshold, "threshold", 0.1, "largest acceptable spread of used/capacity (0.1 = 10 points)")
	return c
}

func rebalance(cmd *cobra.Command, s *meta.Store, threshold float64, apply bool) error {
	ctx, w := cmd.Context(), cmd.OutOrStdout()
	cl, err := s.Cluster(ctx)
	if err != nil {
		return err
	}
	snap, err := controller.LoadSnapshot(ctx, s)
	if err != nil {
		return err
	}
	plan, err := snap.PlanRebalance(threshold, cl.DomainLabel)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "spread before %.1f%%, after %.1f%% (threshold %.1f%%): %d moves, %s of shard data\n",
		plan.SpreadBefore*100, plan.SpreadAfter*100, threshold*100, len(plan.Moves), formatBytes(int64(len(plan.Moves))*cl.SlotSize))
	if len(plan.Moves) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SEGMENT\tSHARD\tFROM\tTO")
		for _, m := range plan.Moves {
			fmt.Fprintf(tw, "%s/%d\t%d\t%s\t%s\n", m.Volume, m.Segment, m.Shard, m.From, m.To)
		}
		tw.Flush()
	}
	switch {
	case !apply:
		return nil
	case len(plan.Moves) == 0:
		fmt.Fprintln(w, "nothing to do: no task recorded")
		return nil
	}
	id := fmt.Sprintf("rebalance-%d", time.Now().UnixMilli())
	if err := s.PutTask(ctx, controller.RebalanceRecord(id, threshold)); err != nil {
		return err
	}
	fmt.Fprintf(w, "task %s recorded: the leading controller carries it out (nvstripe admin status)\n", id)
	return nil
}

// formatBytes prints n in the largest binary unit that keeps it >= 1.
func formatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f, i = f/1024, i+1
	}
	if f == float64(int64(f)) {
		return fmt.Sprintf("%d%s", int64(f), units[i])
	}
	return fmt.Sprintf("%.1f%s", f, units[i])
}

func newAdminDrainCmd(g *globals, a *etcdAuth) *cobra.Command {
	return &cobra.Command{
		Use:   "drain HOST|NS",
		Short: "Empty a host or a namespace: its shards are copied away by the controller",
		Long: "drain sets the namespace, or every in-service namespace of the host, to state draining: it\n" +
			"receives no new segments and the leading controller copies its shards elsewhere (each stays\n" +
			"readable where it is until its copy commits). `ns set-state NS in` undoes it.",
		Args: cobra.ExactArgs(1),
		RunE: withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
			ids, err := drainTargets(cmd, s, args[0])
			if err != nil {
				return err
			}
			for _, id := range ids {
				if err := s.SetNamespaceState(cmd.Context(), id, placement.StateDraining); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "namespace %s: draining\n", id)
			}
			return nil
		}),
	}
}

// drainTargets resolves a namespace ID, or a host's namespaces in state in.
func drainTargets(cmd *cobra.Command, s *meta.Store, name string) ([]string, error) {
	nss, err := s.Namespaces(cmd.Context())
	if err != nil {
		return nil, err
	}
	var ids []string
	host := false
	for _, n := range nss {
		if n.ID == name {
			return []string{n.ID}, nil
		}
		if n.Host == name {
			host = true
			if n.State == placement.StateIn.String() {
				ids = append(ids, n.ID)
			}
		}
	}
	if !host {
		return nil, fmt.Errorf("%q is neither a namespace nor a host with namespaces: %w", name, meta.ErrNotFound)
	}
	if len(ids) == 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "host %s has no namespace in service: nothing to drain\n", name)
	}
	return ids, nil
}

func newAdminFailCmd(g *globals, a *etcdAuth) *cobra.Command {
	return &cobra.Command{
		Use:   "fail NS",
		Short: "Mark a namespace failed: the controller rebuilds its shards elsewhere at once",
		Args:  cobra.ExactArgs(1),
		RunE: withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
			if err := s.SetNamespaceState(cmd.Context(), args[0], placement.StateFailed); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "namespace %s: failed; its shards will be rebuilt\n", args[0])
			return nil
		}),
	}
}
