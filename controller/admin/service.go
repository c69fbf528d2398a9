package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/placement"
)

// Ops are the admin operations: Service does them on etcd, Client asks a
// controller's admin API, which does them with a Service.
type Ops interface {
	Status(context.Context, *StatusRequest) (*StatusReply, error)
	Rebalance(context.Context, *RebalanceRequest) (*RebalanceReply, error)
	Drain(context.Context, *DrainRequest) (*DrainReply, error)
	Fail(context.Context, *FailRequest) (*FailReply, error)
}

// Service does the admin operations on etcd.
type Service struct {
	UnimplementedAdminServer
	s *meta.Store
}

var (
	_ Ops         = (*Service)(nil)
	_ AdminServer = (*Service)(nil)
)

// NewService returns the admin operations on s.
func NewService(s *meta.Store) *Service { return &Service{s: s} }

// Status reads the cluster's health at one revision: volumes, namespaces,
// tasks, what the controller would report blocked, and the leader.
func (e *Service) Status(ctx context.Context, _ *StatusRequest) (*StatusReply, error) {
	snap, err := controller.LoadSnapshot(ctx, e.s)
	if err != nil {
		return nil, err
	}
	cl, err := e.s.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	st := BuildStatus(snap, time.Now(), cl.SlotSize)
	st.Blocked = blocked(snap, cl.DomainLabel)
	rebalanceProgress(st, snap, cl)
	if err := addUnsettled(ctx, e.s, st); err != nil {
		return nil, err
	}
	if st.Leader, err = e.s.Leader(ctx); err != nil && !errors.Is(err, meta.ErrNotFound) {
		return nil, err
	}
	return st, nil
}

// BuildStatus describes snap: its revision, volumes, namespaces (use and
// capacity in bytes of slotSize slots) and tasks (a move with its ETA at
// now). Status adds the leader and what is blocked.
func BuildStatus(snap *controller.Snapshot, now time.Time, slotSize int64) *StatusReply {
	st := &StatusReply{Revision: snap.Rev}
	for _, h := range snap.Health() {
		st.Volumes = append(st.Volumes, &VolumeStatus{Volume: h.Volume, K: int32(h.K), M: int32(h.M),
			Segments: int32(h.Segments), Lost: int32(h.Lost), Stale: int32(h.Stale), Degraded: int32(h.Degraded),
			Moving: int32(h.Moving), Health: h.Status(), Owner: snap.Owners[h.Volume]})
	}
	for _, n := range snap.State.Namespaces {
		ns := &NamespaceStatus{Id: n.ID, Host: n.Host, State: n.State.String(), Used: n.Used * slotSize, Capacity: n.Capacity * slotSize,
			Fencing: snap.Namespaces[n.ID].Fencing()}
		if r := snap.Namespaces[n.ID]; r != nil && r.Returned != nil {
			ns.Back = r.Returned.Note()
		}
		st.Namespaces = append(st.Namespaces, ns)
	}
	for _, r := range snap.Tasks {
		st.Tasks = append(st.Tasks, taskStatus(r, now))
	}
	return st
}

// taskStatus describes one task record, with a move's progress and ETA.
func taskStatus(r *meta.TaskRecord, now time.Time) *TaskStatus {
	t := &TaskStatus{Id: r.ID, Kind: r.Kind, Holder: r.Holder, State: r.State, Done: r.Done, Total: r.Total, Error: r.Error,
		Found: r.Found, Healed: r.Healed, Unhealed: r.Unhealed, Ended: r.Ended}
	if mt, ok, err := moves.ParseTask(r); ok && err == nil {
		t.Kind, t.Segment, t.Shard, t.From, t.To = mt.Kind.String(), mt.Segment.String(), int32(mt.Shard), mt.From, mt.To
		if eta, ok := moves.ETA(mt.Started, now, mt.Done, mt.Total); ok {
			t.EtaSeconds = eta.Seconds()
		}
	}
	if rt, ok, err := controller.ParseTask(r); ok && err == nil {
		t.Kind = "rebalance threshold=" + strconv.FormatFloat(rt.Threshold, 'g', -1, 64)
	}
	return t
}

// rebalanceProgress fills in the progress of rebalance tasks. A task's
// Total is the shard data its plan moved when it was recorded; Done is
// Total less what is left: what a plan made now would move, and what the
// rebalance moves in flight have still to copy.
func rebalanceProgress(st *StatusReply, snap *controller.Snapshot, cl *meta.ClusterRecord) {
	var inFlight int64
	for _, t := range st.Tasks {
		if t.Segment != "" && t.Kind == decide.MoveRebalance.String() {
			inFlight += cl.SlotSize - min(max(t.Done, 0), cl.SlotSize)
		}
	}
	threshold := map[string]float64{}
	for _, r := range snap.Tasks {
		if task, ok, err := controller.ParseTask(r); ok && err == nil {
			threshold[r.ID] = task.Threshold
		}
	}
	for _, t := range st.Tasks {
		th, ok := threshold[t.Id]
		if !ok || t.Total <= 0 {
			continue
		}
		if plan, err := snap.PlanRebalance(th, cl.DomainLabel); err == nil {
			t.Done = min(max(t.Total-int64(len(plan.Moves))*cl.SlotSize-inFlight, 0), t.Total)
		}
	}
}

// blocked runs the controller's decision on snap and returns what it
// reports as Blocked.
func blocked(snap *controller.Snapshot, domainLabel string) []string {
	acts, err := decide.Decide(snap.State, time.Now(), decide.Config{DomainLabel: domainLabel})
	if err != nil {
		return []string{"cannot decide: " + err.Error()}
	}
	var out []string
	for _, a := range acts {
		if b, ok := a.(decide.Blocked); ok {
			out = append(out, fmt.Sprintf("%s shard %d: %v", b.Segment, b.Shard, b.Err))
		}
	}
	return out
}

// Rebalance plans the moves that bring the spread of used/capacity to at
// most req.Threshold and, with req.Apply, records a rebalance task.
func (e *Service) Rebalance(ctx context.Context, req *RebalanceRequest) (*RebalanceReply, error) {
	if !(req.Threshold > 0 && req.Threshold < 1) { // NaN too
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
	rep := &RebalanceReply{SpreadBefore: plan.SpreadBefore, SpreadAfter: plan.SpreadAfter, Bytes: int64(len(plan.Moves)) * cl.SlotSize}
	for _, m := range plan.Moves {
		rep.Moves = append(rep.Moves, &Move{Volume: m.Volume, Segment: m.Segment, Shard: int32(m.Shard), From: m.From, To: m.To})
	}
	if req.Apply && len(plan.Moves) > 0 {
		rep.Task = fmt.Sprintf("rebalance-%d", time.Now().UnixMilli())
		rec := controller.RebalanceRecord(rep.Task, req.Threshold)
		rec.Total = rep.Bytes
		if err := e.s.PutTask(ctx, rec); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// Drain sets the namespace req.Name, or every in-service namespace of the
// host req.Name, to state draining; one that holds no slot goes straight to
// drained (the controller marks the others drained once they are empty).
func (e *Service) Drain(ctx context.Context, req *DrainRequest) (*DrainReply, error) {
	ids, err := drainTargets(ctx, e.s, req.Name)
	if err != nil {
		return nil, err
	}
	if err := e.checkDrainable(ctx, req.Name, ids); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if err := e.drainOne(ctx, id); err != nil {
			return nil, err
		}
	}
	return &DrainReply{Namespaces: ids}, nil
}

// ErrNoRoom refuses a drain whose shards no failure domain can take.
var ErrNoRoom = errors.New("no failure domain can take the shards")

// checkDrainable refuses, before anything changes, to drain the namespaces
// ids (of name) when the controller's decision, on the cluster as it
// would be with them draining, reports shards blocked that it does not
// report now: their copies would have nowhere to go.
func (e *Service) checkDrainable(ctx context.Context, name string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	snap, err := controller.LoadSnapshot(ctx, e.s)
	if err != nil {
		return err
	}
	cl, err := e.s.Cluster(ctx)
	if err != nil {
		return err
	}
	before := blocked(snap, cl.DomainLabel)
	nss := slices.Clone(snap.State.Namespaces)
	for i := range nss {
		if slices.Contains(ids, nss[i].ID) {
			nss[i].State = placement.StateDraining
		}
	}
	snap.State.Namespaces = nss
	for _, b := range blocked(snap, cl.DomainLabel) {
		if !slices.Contains(before, b) {
			return fmt.Errorf("drain %s refused: %w (%s); add a host in another failure domain, or recreate the volume with --allow-shared-domains: %w",
				name, ErrNoRoom, b, meta.ErrInvalid)
		}
	}
	return nil
}

// drainOne sets namespace id draining, then drained when it holds no slot.
// A slot allocated in between is moved away by the controller like a
// draining namespace's (rule 3b treats drained alike).
func (e *Service) drainOne(ctx context.Context, id string) error {
	if err := e.s.SetNamespaceState(ctx, id, placement.StateDraining); err != nil {
		return err
	}
	a, err := e.s.Allocation(ctx, id)
	if err != nil || a.Used > 0 {
		return err
	}
	return e.s.SetNamespaceState(ctx, id, placement.StateDrained)
}

// Fail marks the namespace req.Ns failed.
func (e *Service) Fail(ctx context.Context, req *FailRequest) (*FailReply, error) {
	return &FailReply{}, e.s.SetNamespaceState(ctx, req.Ns, placement.StateFailed)
}

// drainTargets resolves a namespace ID, or a host's namespaces in service
// or draining already (a drain asked again waits for those).
func drainTargets(ctx context.Context, s *meta.Store, name string) ([]string, error) {
	nss, err := s.Namespaces(ctx)
	if err != nil {
		return nil, err
	}
	ids := []string{}
	host := false
	for _, n := range nss {
		if n.ID == name && n.State == placement.StateDrained.String() {
			return []string{n.ID}, nil // already drained: nothing to wait for
		}
		if n.ID == name && n.State != placement.StateIn.String() && n.State != placement.StateDraining.String() {
			return nil, fmt.Errorf("namespace %s is %s: only a namespace in service can be drained (lost shards are rebuilt): %w", n.ID, n.State, meta.ErrInvalid)
		}
		if n.ID == name {
			return []string{n.ID}, nil
		}
		if n.Host == name {
			host = true
			if n.State == placement.StateIn.String() || n.State == placement.StateDraining.String() {
				ids = append(ids, n.ID)
			}
		}
	}
	if !host {
		return nil, fmt.Errorf("%q is neither a namespace nor a host with namespaces: %w", name, meta.ErrNotFound)
	}
	return ids, nil
}

// addUnsettled adds to st's volumes the blocks their records name
// unsettled.
func addUnsettled(ctx context.Context, s *meta.Store, st *StatusReply) error {
	counts, err := s.UnsettledCounts(ctx)
	if err != nil {
		return err
	}
	for _, v := range st.Volumes {
		c := counts[v.Volume]
		v.Unsettled, v.UnsettledMore = int32(c.Blocks), c.More
	}
	return nil
}
