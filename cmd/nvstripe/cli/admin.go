package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/placement"
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
func withAdmin(g *globals, a *etcdAuth, f *adminFlags, fn func(cmd *cobra.Command, args []string, ops adminOps) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if f.controller == "" {
			return withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
				return fn(cmd, args, etcdAdmin{s})
			})(cmd, args)
		}
		cc, err := grpc.NewClient(f.controller, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(adminCodec{})))
		if err != nil {
			return fmt.Errorf("controller admin API %s: %w", f.controller, err)
		}
		defer cc.Close()
		return fn(cmd, args, rpcAdmin{cc})
	}
}

// statusJSON is `admin status --json`.
type statusJSON struct {
	// Revision is the etcd revision the whole status was read at.
	Revision   int64        `json:"revision"`
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

func newAdminStatusCmd(g *globals, a *etcdAuth, f *adminFlags) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status [--json]",
		Short: "Cluster health: volumes (healthy, degraded by N, at risk), namespaces, tasks with progress",
		Args:  cobra.NoArgs,
		RunE: withAdmin(g, a, f, func(cmd *cobra.Command, _ []string, ops adminOps) error {
			st, err := ops.Status(cmd.Context(), &statusRequest{})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), st)
			}
			printStatus(cmd.OutOrStdout(), *st)
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func buildStatus(snap *controller.Snapshot, now time.Time) statusJSON {
	st := statusJSON{Revision: snap.Rev, Volumes: []volumeJSON{}, Namespaces: []nsJSON{}, Tasks: []taskJSON{}}
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
	fmt.Fprintln(tw, "VOLUME\tLAYOUT\tSEGMENTS\tHEALTH\tSTALE\tMOVING\tOWNER")
	for _, v := range st.Volumes {
		fmt.Fprintf(tw, "%s\t%d+%d\t%d\t%s\t%d\t%d\t%s\n", v.Volume, v.K, v.M, v.Segments, v.Health, v.Stale, v.Moving, dash(v.Owner))
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

func newAdminRebalanceCmd(g *globals, a *etcdAuth, f *adminFlags) *cobra.Command {
	req := &rebalanceRequest{}
	c := &cobra.Command{
		Use:   "rebalance [--threshold 0.1] [--apply]",
		Short: "Print the moves that even out capacity use; --apply has the controller carry them out",
		Long: "rebalance plans moves of shards from fuller to emptier namespaces until the spread of\n" +
			"used/capacity between namespaces in service is at most --threshold, keeping the failure-domain\n" +
			"rule, and prints them with the bytes to copy and the spread before and after. With --apply it\n" +
			"records a rebalance task; the leading controller carries it out (re-planning as it goes) and\n" +
			"removes the task when done.",
		Args: cobra.NoArgs,
		RunE: withAdmin(g, a, f, func(cmd *cobra.Command, _ []string, ops adminOps) error {
			if req.Threshold <= 0 || req.Threshold >= 1 {
				return usageError{fmt.Errorf("--threshold %g: want a fraction between 0 and 1", req.Threshold)}
			}
			rep, err := ops.Rebalance(cmd.Context(), req)
			if err != nil {
				return err
			}
			printRebalance(cmd.OutOrStdout(), req, rep)
			return nil
		}),
	}
	c.Flags().BoolVar(&req.Apply, "apply", false, "record the task for the controller")
	c.Flags().Float64Var(&req.Threshold, "threshold", 0.1, "largest acceptable spread of used/capacity (0.1 = 10 points)")
	return c
}

func printRebalance(w io.Writer, req *rebalanceRequest, rep *rebalanceReply) {
	fmt.Fprintf(w, "spread before %.1f%%, after %.1f%% (threshold %.1f%%): %d moves, %s of shard data\n",
		rep.SpreadBefore*100, rep.SpreadAfter*100, req.Threshold*100, len(rep.Moves), formatBytes(rep.Bytes))
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

func newAdminDrainCmd(g *globals, a *etcdAuth, f *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "drain HOST|NS",
		Short: "Empty a host or a namespace: its shards are copied away by the controller",
		Long: "drain sets the namespace, or every in-service namespace of the host, to state draining: it\n" +
			"receives no new segments and the leading controller copies its shards elsewhere (each stays\n" +
			"readable where it is until its copy commits). `ns set-state NS in` undoes it.",
		Args: cobra.ExactArgs(1),
		RunE: withAdmin(g, a, f, func(cmd *cobra.Command, args []string, ops adminOps) error {
			rep, err := ops.Drain(cmd.Context(), &drainRequest{Name: args[0]})
			if err != nil {
				return err
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
		RunE: withAdmin(g, a, f, func(cmd *cobra.Command, args []string, ops adminOps) error {
			if _, err := ops.Fail(cmd.Context(), &failRequest{NS: args[0]}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "namespace %s: failed; its shards will be rebuilt\n", args[0])
			return nil
		}),
	}
}

// Requests and replies of the admin operations (the gRPC messages, as JSON).
type (
	statusRequest    struct{}
	rebalanceRequest struct {
		Threshold float64 `json:"threshold"`
		Apply     bool    `json:"apply"`
	}
	rebalanceReply struct {
		SpreadBefore float64          `json:"spread_before"`
		SpreadAfter  float64          `json:"spread_after"`
		Moves        []placement.Move `json:"moves"`
		Bytes        int64            `json:"bytes"`
		Task         string           `json:"task,omitempty"` // the recorded task (--apply)
	}
	drainRequest struct {
		Name string `json:"name"` // a namespace or a host
	}
	drainReply struct {
		Namespaces []string `json:"namespaces"` // set to draining
	}
	failRequest struct {
		NS string `json:"ns"`
	}
	failReply struct{}
)

// adminOps are the admin operations: etcdAdmin does them on etcd, rpcAdmin
// asks a controller's admin API, which does them with etcdAdmin.
type adminOps interface {
	Status(context.Context, *statusRequest) (*statusJSON, error)
	Rebalance(context.Context, *rebalanceRequest) (*rebalanceReply, error)
	Drain(context.Context, *drainRequest) (*drainReply, error)
	Fail(context.Context, *failRequest) (*failReply, error)
}

// etcdAdmin does the admin operations on etcd.
type etcdAdmin struct{ s *meta.Store }

func (e etcdAdmin) Status(ctx context.Context, _ *statusRequest) (*statusJSON, error) {
	snap, err := controller.LoadSnapshot(ctx, e.s)
	if err != nil {
		return nil, err
	}
	st := buildStatus(snap, time.Now())
	if cl, err := e.s.Cluster(ctx); err == nil {
		st.Blocked = blocked(snap, cl.DomainLabel)
	}
	if st.Leader, err = e.s.Leader(ctx); err != nil && !errors.Is(err, meta.ErrNotFound) {
		return nil, err
	}
	return &st, nil
}

func (e etcdAdmin) Rebalance(ctx context.Context, req *rebalanceRequest) (*rebalanceReply, error) {
	if req.Threshold <= 0 || req.Threshold >= 1 {
		return nil, fmt.Errorf("threshold %g: want a fraction between 0 and 1: %w", req.Threshold, meta.ErrInvalid)
	}
	cl, err := e.s.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	snap, err := controller.LoadSnapshot(ctx, e.s)
	if err != nil {
		return nil, err
	}
	plan, err := snap.PlanRebalance(req.Threshold, cl.DomainLabel)
	if err != nil {
		return nil, err
	}
	rep := &rebalanceReply{SpreadBefore: plan.SpreadBefore, SpreadAfter: plan.SpreadAfter, Moves: plan.Moves,
		Bytes: int64(len(plan.Moves)) * cl.SlotSize}
	if req.Apply && len(plan.Moves) > 0 {
		rep.Task = fmt.Sprintf("rebalance-%d", time.Now().UnixMilli())
		if err := e.s.PutTask(ctx, controller.RebalanceRecord(rep.Task, req.Threshold)); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

func (e etcdAdmin) Drain(ctx context.Context, req *drainRequest) (*drainReply, error) {
	ids, err := drainTargets(ctx, e.s, req.Name)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if err := e.s.SetNamespaceState(ctx, id, placement.StateDraining); err != nil {
			return nil, err
		}
	}
	return &drainReply{Namespaces: ids}, nil
}

func (e etcdAdmin) Fail(ctx context.Context, req *failRequest) (*failReply, error) {
	return &failReply{}, e.s.SetNamespaceState(ctx, req.NS, placement.StateFailed)
}

// drainTargets resolves a namespace ID, or a host's namespaces in state in.
func drainTargets(ctx context.Context, s *meta.Store, name string) ([]string, error) {
	nss, err := s.Namespaces(ctx)
	if err != nil {
		return nil, err
	}
	ids := []string{}
	host := false
	for _, n := range nss {
		if n.ID == name && n.State != placement.StateIn.String() && n.State != placement.StateDraining.String() {
			return nil, fmt.Errorf("namespace %s is %s: only a namespace in service can be drained (lost shards are rebuilt): %w", n.ID, n.State, meta.ErrInvalid)
		}
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
	return ids, nil
}

// adminService is the gRPC service name of the controller's admin API.
const adminService = "nvstripe.controller.v1.Admin"

// adminCodec is the admin API's gRPC codec: messages as JSON.
type adminCodec struct{}

func (adminCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }
func (adminCodec) Unmarshal(data []byte, v any) error {
	if len(data) == 0 {
		return nil
	}
	return json.Unmarshal(data, v)
}
func (adminCodec) Name() string { return "json" }

// rpcAdmin asks a controller's admin API.
type rpcAdmin struct{ cc *grpc.ClientConn }

func rpcCall[Req, Rep any](ctx context.Context, cc *grpc.ClientConn, name string, req *Req) (*Rep, error) {
	rep := new(Rep)
	if err := cc.Invoke(ctx, "/"+adminService+"/"+name, req, rep); err != nil {
		return nil, fmt.Errorf("controller admin API: %s", status.Convert(err).Message())
	}
	return rep, nil
}

func (r rpcAdmin) Status(ctx context.Context, req *statusRequest) (*statusJSON, error) {
	return rpcCall[statusRequest, statusJSON](ctx, r.cc, "Status", req)
}
func (r rpcAdmin) Rebalance(ctx context.Context, req *rebalanceRequest) (*rebalanceReply, error) {
	return rpcCall[rebalanceRequest, rebalanceReply](ctx, r.cc, "Rebalance", req)
}
func (r rpcAdmin) Drain(ctx context.Context, req *drainRequest) (*drainReply, error) {
	return rpcCall[drainRequest, drainReply](ctx, r.cc, "Drain", req)
}
func (r rpcAdmin) Fail(ctx context.Context, req *failRequest) (*failReply, error) {
	return rpcCall[failRequest, failReply](ctx, r.cc, "Fail", req)
}

// newAdminServer returns the controller's admin API server: the admin
// operations on s.
func newAdminServer(s *meta.Store) *grpc.Server {
	srv := grpc.NewServer(grpc.ForceServerCodec(adminCodec{}))
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: adminService,
		HandlerType: (*adminOps)(nil),
		Methods: []grpc.MethodDesc{
			adminMethod("Status", adminOps.Status),
			adminMethod("Rebalance", adminOps.Rebalance),
			adminMethod("Drain", adminOps.Drain),
			adminMethod("Fail", adminOps.Fail),
		},
	}, adminOps(etcdAdmin{s}))
	return srv
}

// adminMethod adapts one typed operation to a grpc.MethodDesc.
func adminMethod[Req, Rep any](name string, call func(adminOps, context.Context, *Req) (*Rep, error)) grpc.MethodDesc {
	h := func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		req := new(Req)
		if err := dec(req); err != nil {
			return nil, err
		}
		if icpt == nil {
			return call(srv.(adminOps), ctx, req)
		}
		info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + adminService + "/" + name}
		return icpt(ctx, req, info, func(ctx context.Context, r any) (any, error) { return call(srv.(adminOps), ctx, r.(*Req)) })
	}
	return grpc.MethodDesc{MethodName: name, Handler: h}
}
