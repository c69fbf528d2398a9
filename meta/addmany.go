package meta

import (
	"context"
	"errors"
	"fmt"
)

// AddNamespaces records many namespaces, as AddNamespace does each, but
// checks them all against one read of the recorded namespaces: AddNamespace
// reads every recorded namespace to find one at the same NQN and NSID, so
// adding a cluster's namespaces one by one reads O(n²) records (at 1,000
// hosts × 16 namespaces, 128 million; docs/scale.md). Nothing is written
// unless every spec passes its checks (fields, host, NQN and NSID, id,
// among themselves too); then each is written by its own transaction,
// which checks its host and id again. It returns the records in the order
// of specs.
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
	for _, rec := range recs {
		if err := s.putNamespace(ctx, rec); err != nil {
			return nil, fmt.Errorf("namespace %s: %w", rec.ID, err)
		}
	}
	return recs, nil
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
