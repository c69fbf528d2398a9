package meta

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// AddNamespaces records many namespaces, as AddNamespace does each, but
// checks them all against one read of the recorded namespaces: AddNamespace
// reads every recorded namespace to find one at the same NQN and NSID, so
// adding a cluster's namespaces one by one reads O(n²) records (at 1,000
// hosts × 16 namespaces, 128 million; docs/scale.md). Nothing is written
// unless every spec passes its checks (fields, host, NQN and NSID, id,
// among themselves too); then they are written up to namespacesPerTxn in
// a transaction, which checks their hosts and ids again (a batch that
// races with a host's removal or the same id's addition may be recorded in
// part: ErrConflict names the transaction that failed). It returns the
// records in the order of specs.
func (s *Store) AddNamespaces(ctx context.Context, specs []NamespaceSpec) ([]*NamespaceRecord, error) {
	c, err := s.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	recs := make([]*NamespaceRecord, len(specs))
	for i, spec := range specs {
		if recs[i], err = newNamespaceRecord(c, spec); err != nil {
			return nil, err
		}
	}
	if err := s.checkNewNamespaces(ctx, recs); err != nil {
		return nil, err
	}
	for from := 0; from < len(recs); from += namespacesPerTxn {
		if err := s.putNamespaces(ctx, recs[from:min(from+namespacesPerTxn, len(recs))]); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// namespacesPerTxn bounds the namespaces one transaction of AddNamespaces
// writes: 2 puts and up to 3 compares each stay under maxTxnOps.
const namespacesPerTxn = maxTxnOps / 3

// putNamespaces writes recs and their empty allocations in one
// transaction if their ids are free and their hosts exist.
func (s *Store) putNamespaces(ctx context.Context, recs []*NamespaceRecord) error {
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	hosts := map[string]bool{}
	for _, rec := range recs {
		recCmps, recOps, err := s.newNamespaceTxn(rec)
		if err != nil {
			return err
		}
		cmps, ops = append(cmps, recCmps...), append(ops, recOps...)
		if !hosts[rec.Host] {
			hosts[rec.Host] = true
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.keys.host(rec.Host)), ">", 0))
		}
	}
	defer s.invalidate()
	resp, err := s.kv.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return s.wrap(fmt.Sprintf("add namespaces %s..%s", recs[0].ID, recs[len(recs)-1].ID), err)
	}
	if !resp.Succeeded {
		return classErrorf(ErrConflict, "add namespaces %s..%s: a host was removed or an id was taken meanwhile",
			recs[0].ID, recs[len(recs)-1].ID)
	}
	return nil
}

// checkNewNamespaces is checkNewNamespace for many records, with one read
// of the recorded namespaces.
func (s *Store) checkNewNamespaces(ctx context.Context, recs []*NamespaceRecord) error {
	all, err := s.Namespaces(ctx)
	if err != nil {
		return err
	}
	type at struct {
		nqn  string
		nsid uint32
	}
	byAt, ids := map[at]*NamespaceRecord{}, map[string]bool{}
	for _, n := range all {
		byAt[at{n.NQN, n.NSID}], ids[n.ID] = n, true
	}
	hosts := map[string]bool{}
	for _, rec := range recs {
		if !hosts[rec.Host] {
			if _, err := s.get(ctx, s.keys.host(rec.Host), &HostRecord{}); errors.Is(err, ErrNotFound) {
				return hostNotFound(rec.Host)
			} else if err != nil {
				return err
			}
			hosts[rec.Host] = true
		}
		if n := byAt[at{rec.NQN, rec.NSID}]; n != nil {
			return AlreadyRecorded(n)
		}
		if ids[rec.ID] {
			return classErrorf(ErrExists, "namespace %q already exists", rec.ID)
		}
		byAt[at{rec.NQN, rec.NSID}], ids[rec.ID] = rec, true
	}
	return nil
}
