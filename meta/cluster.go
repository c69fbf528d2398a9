package meta

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nvstripe/nvstripe/placement"
)

// Slot size limits. A slot size is a power of two so that every chunk size
// divides it.
const (
	MinSlotSize = 64 << 10
	MaxSlotSize = 64 << 30
)

// CheckSlotSize validates a slot size: a power of two from MinSlotSize to
// MaxSlotSize.
func CheckSlotSize(n int64) error {
	if n < MinSlotSize || n > MaxSlotSize || bits.OnesCount64(uint64(n)) != 1 {
		return fmt.Errorf("slot size %d: must be a power of two from 64KiB to 64GiB: %w", n, ErrInvalid)
	}
	return nil
}

// InitOptions configure InitCluster. The zero value is valid.
type InitOptions struct {
	// SlotSize is the cluster-wide slot size. Default DefaultSlotSize.
	SlotSize int64
	// DomainLabel is the host label that names failure domains ("rack").
	// Default "": each host is its own failure domain.
	DomainLabel string
}

// InitCluster creates the cluster record with a new random id. It fails with
// ErrExists when the cluster is already initialized.
func (s *Store) InitCluster(ctx context.Context, o InitOptions) (*ClusterRecord, error) {
	if o.SlotSize == 0 {
		o.SlotSize = DefaultSlotSize
	}
	if err := CheckSlotSize(o.SlotSize); err != nil {
		return nil, err
	}
	rec := &ClusterRecord{ID: uuid.NewString(), Name: s.cfg.Cluster, SlotSize: o.SlotSize, Schema: SchemaVersion, DomainLabel: o.DomainLabel}
	if err := s.create(ctx, s.keys.cluster(), rec); err != nil {
		if errors.Is(err, ErrExists) {
			return nil, classErrorf(ErrExists, "cluster %q is already initialized", s.cfg.Cluster)
		}
		return nil, err
	}
	return rec, nil
}

// Cluster returns the cluster record (ErrNotInitialized before InitCluster).
func (s *Store) Cluster(ctx context.Context) (*ClusterRecord, error) {
	s.mu.Lock()
	c := s.cluster
	s.mu.Unlock()
	if c != nil {
		return c, nil
	}
	c = &ClusterRecord{}
	if _, err := s.get(ctx, s.keys.cluster(), c); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("cluster %q at %v: %w", s.cfg.Cluster, s.cfg.Endpoints, ErrNotInitialized)
		}
		return nil, err
	}
	s.mu.Lock()
	s.cluster = c
	s.mu.Unlock()
	return c, nil
}

// SetMaxOvercommit records the cluster's overcommit limit (see
// ClusterRecord.MaxOvercommit).
func (s *Store) SetMaxOvercommit(ctx context.Context, r float64) (*ClusterRecord, error) {
	if err := CheckOvercommit(r); err != nil {
		return nil, err
	}
	if _, err := s.Cluster(ctx); err != nil {
		return nil, err
	}
	var out *ClusterRecord
	err := update(ctx, s, s.keys.cluster(), func() *ClusterRecord { return &ClusterRecord{} },
		func(c *ClusterRecord) error { c.MaxOvercommit, out = r, c; return nil })
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.cluster = out
	s.mu.Unlock()
	return out, nil
}

// AddHost records a host. Duplicate names fail with ErrExists.
func (s *Store) AddHost(ctx context.Context, name string, labels map[string]string) (*HostRecord, error) {
	if _, err := s.Cluster(ctx); err != nil {
		return nil, err
	}
	rec := &HostRecord{Name: name, Labels: labels}
	if err := rec.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := s.create(ctx, s.keys.host(name), rec); err != nil {
		if errors.Is(err, ErrExists) {
			return nil, classErrorf(ErrExists, "host %q already exists", name)
		}
		return nil, err
	}
	s.invalidate()
	return rec, nil
}

// Hosts lists the hosts in name order.
func (s *Store) Hosts(ctx context.Context) ([]*HostRecord, error) {
	hs, _, err := list(ctx, s, s.keys.hosts(), func() *HostRecord { return &HostRecord{} })
	return hs, err
}

// DefaultNamespaceID is the id AddNamespace gives a namespace without one:
// "<host>-n<nsid>".
func DefaultNamespaceID(host string, nsid uint32) string { return fmt.Sprintf("%s-n%d", host, nsid) }

// NamespaceSpec is what AddNamespace needs to know about a namespace.
type NamespaceSpec struct {
	ID    string // cluster-wide name; default DefaultNamespaceID(Host, NSID)
	Host  string
	NQN   string
	NSID  uint32
	UUID  string // optional NGUID/UUID as reported by the target
	Size  int64  // bytes
	Paths []PathRecord
	// Unfenced and AllowUnfenced: see NamespaceRecord.
	Unfenced, AllowUnfenced bool
}

// AddNamespace records a namespace in state "in" with an empty allocation
// bitmap (slot 0 reserved for its label), in one transaction. The host must
// exist (ErrNotFound); the id and the (NQN, NSID) pair must be new
// (ErrExists). The caller writes the namespace label (ClusterRecord.Label).
func (s *Store) AddNamespace(ctx context.Context, spec NamespaceSpec) (*NamespaceRecord, error) {
	rec, err := s.CheckNamespace(ctx, spec)
	if err != nil {
		return nil, err
	}
	return rec, s.putNamespace(ctx, rec)
}

// CheckNamespace checks everything AddNamespace checks and returns the
// record it would write, writing nothing: the fields (a zero spec.Size,
// not known before the namespace is connected, is not checked), that the
// host exists (ErrNotFound), that the id is free and that no namespace is
// recorded with the same NQN and NSID (ErrExists). `ns add` runs it before
// it writes a label, so that a mistyped argument leaves nothing behind;
// AddNamespace's transaction checks the host and id again.
func (s *Store) CheckNamespace(ctx context.Context, spec NamespaceSpec) (*NamespaceRecord, error) {
	c, err := s.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	rec, err := newNamespaceRecord(c, spec)
	if err != nil {
		return nil, err
	}
	if err := s.checkNewNamespace(ctx, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// newNamespaceRecord is the record of spec in cluster c, its fields
// checked.
func newNamespaceRecord(c *ClusterRecord, spec NamespaceSpec) (*NamespaceRecord, error) {
	rec := &NamespaceRecord{ID: spec.ID, Host: spec.Host, NQN: spec.NQN, NSID: spec.NSID, UUID: spec.UUID,
		Size: spec.Size, Slots: spec.Size / c.SlotSize, State: placement.StateIn.String(), Paths: spec.Paths,
		Unfenced: spec.Unfenced, AllowUnfenced: spec.AllowUnfenced}
	for i := range rec.Paths {
		if rec.Paths[i].ANAState == "" {
			rec.Paths[i].ANAState = ANAUnknown
		}
	}
	if rec.ID == "" {
		rec.ID = DefaultNamespaceID(spec.Host, spec.NSID)
	}
	*rec.version() = RecordVersion
	check := rec.check
	if spec.Size == 0 {
		check = rec.checkIdentity
	}
	if err := check(); err != nil {
		return nil, fmt.Errorf("namespace %s (slot size %d): %w: %w", rec.ID, c.SlotSize, ErrInvalid, err)
	}
	return rec, nil
}

// NamespaceAt returns the namespace recorded with subsystem nqn and
// namespace nsid (ErrNotFound: none).
func (s *Store) NamespaceAt(ctx context.Context, nqn string, nsid uint32) (*NamespaceRecord, error) {
	all, err := s.Namespaces(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range all {
		if n.NQN == nqn && n.NSID == nsid {
			return n, nil
		}
	}
	return nil, classErrorf(ErrNotFound, "no namespace is recorded at %s nsid %d", nqn, nsid)
}

// checkNewNamespace checks that rec's host exists, its NQN and NSID are not
// recorded and its id is free.
func (s *Store) checkNewNamespace(ctx context.Context, rec *NamespaceRecord) error {
	if _, err := s.get(ctx, s.keys.host(rec.Host), &HostRecord{}); errors.Is(err, ErrNotFound) {
		return hostNotFound(rec.Host)
	} else if err != nil {
		return err
	}
	n, err := s.NamespaceAt(ctx, rec.NQN, rec.NSID)
	switch {
	case err == nil:
		return AlreadyRecorded(n)
	case !errors.Is(err, ErrNotFound):
		return err
	}
	if _, err := s.Namespace(ctx, rec.ID); err == nil {
		return classErrorf(ErrExists, "namespace %q already exists", rec.ID)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// AlreadyRecorded is the error (class ErrExists) of adding a namespace at
// the NQN and NSID of recorded namespace n.
func AlreadyRecorded(n *NamespaceRecord) error {
	return classErrorf(ErrExists, "namespace %s nsid %d is already recorded as %q", n.NQN, n.NSID, n.ID)
}

func hostNotFound(host string) error {
	return classErrorf(ErrNotFound, "host %q not found (add it first with `nvstripe host add %s`)", host, host)
}

// newNamespaceTxn returns the compares that rec's id is free (its record
// and allocation keys) and the puts that write rec and its empty
// allocation.
func (s *Store) newNamespaceTxn(rec *NamespaceRecord) ([]clientv3.Cmp, []clientv3.Op, error) {
	nsOp, err := putOp(s.keys.namespace(rec.ID), rec)
	if err != nil {
		return nil, nil, err
	}
	allocOp, err := putOp(s.keys.alloc(rec.ID), newAlloc(rec.Slots))
	if err != nil {
		return nil, nil, err
	}
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(s.keys.namespace(rec.ID)), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(s.keys.alloc(rec.ID)), "=", 0),
	}, []clientv3.Op{nsOp, allocOp}, nil
}

func (s *Store) putNamespace(ctx context.Context, rec *NamespaceRecord) error {
	cmps, ops, err := s.newNamespaceTxn(rec)
	if err != nil {
		return err
	}
	hostKey := s.keys.host(rec.Host)
	cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(hostKey), ">", 0))
	resp, err := s.kv.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(hostKey, clientv3.WithCountOnly())).Commit()
	if err != nil {
		return s.wrap("add namespace "+rec.ID, err)
	}
	if !resp.Succeeded {
		if resp.Responses[0].GetResponseRange().Count == 0 {
			return hostNotFound(rec.Host)
		}
		return classErrorf(ErrExists, "namespace %q already exists", rec.ID)
	}
	s.invalidate()
	return nil
}

// Namespaces lists the namespaces in id order.
func (s *Store) Namespaces(ctx context.Context) ([]*NamespaceRecord, error) {
	ns, _, err := list(ctx, s, s.keys.namespaces(), func() *NamespaceRecord { return &NamespaceRecord{} })
	return ns, err
}

// Namespace reads one namespace.
func (s *Store) Namespace(ctx context.Context, id string) (*NamespaceRecord, error) {
	n := &NamespaceRecord{}
	if _, err := s.get(ctx, s.keys.namespace(id), n); err != nil {
		return nil, err
	}
	return n, nil
}

// Allocation reads a namespace's slot allocation.
func (s *Store) Allocation(ctx context.Context, id string) (*AllocRecord, error) {
	a := &AllocRecord{}
	if _, err := s.get(ctx, s.keys.alloc(id), a); err != nil {
		return nil, err
	}
	return a, nil
}

// Allocations reads every namespace's slot allocation, by namespace id, in
// one request: a view of the whole cluster (the controller's snapshot, a
// capacity judgement) costs one read, not one per namespace.
func (s *Store) Allocations(ctx context.Context) (map[string]*AllocRecord, error) {
	prefix := s.keys.allocs()
	resp, err := s.kv.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, s.wrap("list "+s.keys.describe(prefix), err)
	}
	out := make(map[string]*AllocRecord, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		a := &AllocRecord{}
		if err := decodeKV(kv, a); err != nil {
			return nil, err
		}
		out[strings.TrimPrefix(string(kv.Key), prefix)] = a
	}
	return out, nil
}

// AllocationOf is namespace n's allocation in allocs (from Allocations),
// or an ErrNotFound error as Allocation returns for a missing one.
func AllocationOf(allocs map[string]*AllocRecord, n *NamespaceRecord) (*AllocRecord, error) {
	if a := allocs[n.ID]; a != nil {
		return a, nil
	}
	return nil, classErrorf(ErrNotFound, "allocation of namespace %s not found", n.ID)
}

// SetNamespaceState changes a namespace's state (in, draining, down, out,
// failed). Only namespaces "in" receive new segments.
func (s *Store) SetNamespaceState(ctx context.Context, id string, state placement.State) error {
	if _, err := placement.ParseState(state.String()); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	defer s.invalidate()
	return update(ctx, s, s.keys.namespace(id), func() *NamespaceRecord { return &NamespaceRecord{} },
		func(n *NamespaceRecord) error {
			if state != placement.StateIn {
				n.Returned = nil
			}
			n.State = state.String()
			return nil
		})
}

// SetPathState records the last-known ANA group (0: keep the recorded one)
// and state of one path of a namespace (ErrNotFound when the namespace has
// no such path). A path already recorded so is not written again: every
// node that uses the namespace publishes the change it sees, so when a
// host fails hundreds of nodes record the same state of the same paths at
// once, and only the first of them writes (docs/scale.md).
func (s *Store) SetPathState(ctx context.Context, id, addr string, group uint32, state string) error {
	return update(ctx, s, s.keys.namespace(id), func() *NamespaceRecord { return &NamespaceRecord{} },
		func(n *NamespaceRecord) error {
			for i := range n.Paths {
				if n.Paths[i].Addr == addr && n.Paths[i].ANAState == state && (group == 0 || n.Paths[i].ANAGroup == group) {
					return errUnchanged
				}
				if n.Paths[i].Addr == addr {
					n.Paths[i].ANAState = state
					if group != 0 {
						n.Paths[i].ANAGroup = group
					}
					return nil
				}
			}
			return classErrorf(ErrNotFound, "namespace %s has no path %s", id, addr)
		})
}
