package meta

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Unchanged guards CreateVolumeIf and ResizeVolumeIf: they commit only if
// nothing a judgement of the cluster's space read at revision Rev (a view
// of Store.At) changed since: the cluster record, hosts, namespaces and
// volumes are as they were at Rev, and the namespaces it counted as space
// still exist. When they changed, the change is refused with ErrConflict
// and nothing is written: judge again from a fresh view.
//
// A removed key leaves no revision to compare, so a removal is seen only
// by naming the key: the namespaces are checked one by one when there are
// at most maxUnchangedNamespaces of them (etcd bounds the compares of a
// transaction); beyond, changes and additions are seen, removals are not.
type Unchanged struct {
	Rev        int64
	Namespaces []string // ids that must still exist
}

// maxUnchangedNamespaces bounds the namespaces one guard names, so that
// its compares stay under etcd's --max-txn-ops.
const maxUnchangedNamespaces = maxTxnOps - 8

// cmps returns the compares of u.
func (u Unchanged) cmps(k keys) ([]clientv3.Cmp, error) {
	if u.Rev <= 0 {
		return nil, fmt.Errorf("guard at revision %d: %w", u.Rev, ErrInvalid)
	}
	ids := u.Namespaces
	if len(ids) > maxUnchangedNamespaces {
		ids = nil
	}
	after := u.Rev + 1
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(k.cluster()), "<", after),
		clientv3.Compare(clientv3.ModRevision(k.hosts()), "<", after).WithPrefix(),
		clientv3.Compare(clientv3.ModRevision(k.namespaces()), "<", after).WithPrefix(),
		clientv3.Compare(clientv3.ModRevision(k.volumes()), "<", after).WithPrefix(),
	}
	for _, id := range ids {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k.namespace(id)), ">", 0))
	}
	return cmps, nil
}

// changed is the error of a guarded change that lost.
func changed(what string, u Unchanged) error {
	return classErrorf(ErrConflict, "%s: the cluster's volumes, namespaces or settings changed after revision %d", what, u.Rev)
}

// CreateVolumeIf is CreateVolume that commits only if u holds (ErrConflict
// otherwise, and nothing is recorded).
func (s *Store) CreateVolumeIf(ctx context.Context, spec VolumeSpec, u Unchanged) (*VolumeRecord, error) {
	cmps, err := u.cmps(s.keys)
	if err != nil {
		return nil, err
	}
	return s.createVolume(ctx, spec, cmps)
}

// ResizeVolumeIf is ResizeVolume that commits only if u holds
// (ErrConflict otherwise, and the size stays).
func (s *Store) ResizeVolumeIf(ctx context.Context, name string, size int64, u Unchanged) (*VolumeRecord, error) {
	cmps, err := u.cmps(s.keys)
	if err != nil {
		return nil, err
	}
	v, rev, err := s.volume(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := v.checkResize(name, size); err != nil {
		return nil, err
	}
	v.Size = size
	key := s.keys.volume(name)
	op, err := putOp(key, v)
	if err != nil {
		return nil, err
	}
	cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", rev))
	resp, err := s.kv.Txn(ctx).If(cmps...).Then(op).Commit()
	if err != nil {
		return nil, s.wrap("resize volume "+name, err)
	}
	if !resp.Succeeded {
		return nil, changed("resize volume "+name, u)
	}
	return v, nil
}
