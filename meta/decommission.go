package meta

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nvstripe/nvstripe/placement"
)

// NamespaceReturn records how an out namespace came back into service.
type NamespaceReturn struct {
	At time.Time `json:"at"`
	// Slots is how many slots it still held when it came back: they are
	// reinstated (trusted again but for the blocks the stale log names,
	// which are repaired). 0: every slot had been rebuilt elsewhere.
	Slots int64 `json:"slots"`
}

// Note says how it came back, for people.
func (r *NamespaceReturn) Note() string {
	at := r.At.UTC().Format(time.RFC3339)
	if r.Slots == 0 {
		return "back " + at + ": its slots were rebuilt elsewhere; it holds no data now and takes new slots"
	}
	return fmt.Sprintf("back %s: its %d slots are reinstated (blocks written while it was away are repaired from the stale log)", at, r.Slots)
}

// ReturnNamespace puts an out namespace whose host is alive again back in
// service and records how (Returned): with the slots it still holds
// reinstated, or, when all were rebuilt elsewhere, empty. It does nothing
// to a namespace that is not out (it returns nil then).
func (s *Store) ReturnNamespace(ctx context.Context, id string, now time.Time) (*NamespaceReturn, error) {
	a, err := s.Allocation(ctx, id)
	if err != nil {
		return nil, err
	}
	var back *NamespaceReturn
	err = update(ctx, s, s.keys.namespace(id), func() *NamespaceRecord { return &NamespaceRecord{} },
		func(n *NamespaceRecord) error {
			back = nil
			if n.State != placement.StateOut.String() {
				return nil
			}
			back = &NamespaceReturn{At: now, Slots: a.Used}
			n.State, n.Returned = placement.StateIn.String(), back
			return nil
		})
	if err != nil || back == nil {
		return nil, err
	}
	s.invalidate()
	return back, nil
}

// RemoveNamespace decommissions a namespace: its record and allocation go,
// in one transaction that checks that it holds no slot (ErrBusy, with the
// count and what to do, while it does). A drained namespace qualifies, as
// does one that never took a shard or whose shards were all rebuilt
// elsewhere.
func (s *Store) RemoveNamespace(ctx context.Context, id string) error {
	ops, cmps, err := s.removeNamespaceOps(ctx, id)
	if err != nil {
		return err
	}
	return s.removeTxn(ctx, "namespace "+id, cmps, ops)
}

// removeNamespaceOps reads namespace id and returns the deletes of its
// records and the compares that they are unchanged; ErrBusy while it holds
// slots.
func (s *Store) removeNamespaceOps(ctx context.Context, id string) ([]clientv3.Op, []clientv3.Cmp, error) {
	n := &NamespaceRecord{}
	nrev, err := s.get(ctx, s.keys.namespace(id), n)
	if err != nil {
		return nil, nil, err
	}
	a := &AllocRecord{}
	arev, err := s.get(ctx, s.keys.alloc(id), a)
	if err != nil {
		return nil, nil, err
	}
	if a.Used > 0 {
		return nil, nil, classErrorf(ErrBusy, "namespace %s (%s) still holds %d slots: drain it first "+
			"(`nvstripe admin drain %s --wait` ends with it drained), or let the rebuild of an out or failed namespace finish",
			id, n.State, a.Used, id)
	}
	ops := []clientv3.Op{clientv3.OpDelete(s.keys.namespace(id)), clientv3.OpDelete(s.keys.alloc(id))}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.keys.namespace(id)), "=", nrev),
		clientv3.Compare(clientv3.ModRevision(s.keys.alloc(id)), "=", arev)}
	return ops, cmps, nil
}

// RemoveHost decommissions a host. A host with namespaces is refused
// (ErrBusy, naming them), unless withNamespaces: then its namespaces go
// with it, in the same transaction, provided none holds a slot. It returns
// their ids (empty, not nil: a list in JSON).
func (s *Store) RemoveHost(ctx context.Context, name string, withNamespaces bool) ([]string, error) {
	h := &HostRecord{}
	hrev, err := s.get(ctx, s.keys.host(name), h)
	if err != nil {
		return nil, err
	}
	all, err := s.Namespaces(ctx)
	if err != nil {
		return nil, err
	}
	ids := []string{}
	for _, n := range all {
		if n.Host == name {
			ids = append(ids, n.ID)
		}
	}
	if len(ids) > 0 && !withNamespaces {
		return nil, classErrorf(ErrBusy, "host %s has %d namespaces (%s): remove them first (`nvstripe ns rm`), "+
			"or pass --force to remove those that hold no slot with the host", name, len(ids), strings.Join(ids, ", "))
	}
	ops := []clientv3.Op{clientv3.OpDelete(s.keys.host(name))}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.keys.host(name)), "=", hrev)}
	for _, id := range ids {
		o, c, err := s.removeNamespaceOps(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", name, err)
		}
		ops, cmps = append(ops, o...), append(cmps, c...)
	}
	if len(ops) > maxTxnOps {
		return nil, fmt.Errorf("host %s has %d namespaces: remove some with `nvstripe ns rm` first: %w", name, len(ids), ErrInvalid)
	}
	return ids, s.removeTxn(ctx, "host "+name, cmps, ops)
}

// removeTxn deletes with ops if cmps hold; ErrConflict when something
// changed since it was read (a slot was just allocated: try again).
func (s *Store) removeTxn(ctx context.Context, what string, cmps []clientv3.Cmp, ops []clientv3.Op) error {
	resp, err := s.kv.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return s.wrap("remove "+what, err)
	}
	if !resp.Succeeded {
		return classErrorf(ErrConflict, "remove %s: it changed while being removed (a slot allocated?): try again", what)
	}
	s.invalidate()
	return nil
}
