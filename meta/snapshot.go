package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nvstripe/nvstripe/placement"
)

// snapshot is Allocate's cached view of hosts, namespaces and allocation
// bitmaps, with the mod revision of each record. A stale entry can only make
// a transaction fail its revision compare (then the entry is refreshed from
// the transaction's Else reads); it never lets a slot be handed out twice.
type snapshot struct {
	at     time.Time
	hosts  []*HostRecord
	ids    []string // namespace ids, sorted
	ns     map[string]*nsEntry
	domain string // cluster's domain label
	// built is the placement view of the entries (cluster), kept while
	// only allocation counts change (applyAllocs updates it) and dropped
	// when a record is read again: building it is O(namespaces), about
	// 10 ms at 16,000, and every allocation plans on it.
	built *placement.Cluster
}

type nsEntry struct {
	rec      *NamespaceRecord
	nsRev    int64
	alloc    *AllocRecord // nil when missing
	allocRev int64
}

// invalidate drops the cached snapshot (after local admin changes).
func (s *Store) invalidate() {
	s.mu.Lock()
	s.snap = nil
	s.snapGen++
	s.mu.Unlock()
}

// loadSnapshot reads hosts, namespaces and allocations at one revision.
func (s *Store) loadSnapshot(ctx context.Context) (*snapshot, error) {
	c, err := s.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := s.kv.Txn(ctx).Then(
		clientv3.OpGet(s.keys.hosts(), clientv3.WithPrefix()),
		clientv3.OpGet(s.keys.namespaces(), clientv3.WithPrefix()),
		clientv3.OpGet(s.keys.allocs(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, s.wrap("read cluster state", err)
	}
	snap := &snapshot{at: time.Now(), ns: map[string]*nsEntry{}, domain: c.DomainLabel}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		h := &HostRecord{}
		if err := decodeKV(kv, h); err != nil {
			return nil, err
		}
		snap.hosts = append(snap.hosts, h)
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		if err := snap.setNamespace(kv); err != nil {
			return nil, err
		}
	}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		if err := snap.setAlloc(kv, s.keys.allocs()); err != nil {
			return nil, err
		}
	}
	return snap, nil
}

// setNamespace records a namespace key-value read from etcd.
func (sn *snapshot) setNamespace(kv *mvccpb.KeyValue) error {
	n := &NamespaceRecord{}
	if err := decodeKV(kv, n); err != nil {
		return err
	}
	sn.built = nil
	e := sn.ns[n.ID]
	if e == nil {
		e = &nsEntry{}
		sn.ns[n.ID] = e
		// etcd returns the keys in order: the id goes at the end, in
		// O(log n), not a sort of every id per namespace (O(n² log n)
		// per snapshot: seconds at 16,000 namespaces).
		i, _ := slices.BinarySearch(sn.ids, n.ID)
		sn.ids = slices.Insert(sn.ids, i, n.ID)
	}
	if kv.ModRevision >= e.nsRev {
		e.rec, e.nsRev = n, kv.ModRevision
	}
	return nil
}

// setAlloc records an allocation key-value read from etcd.
func (sn *snapshot) setAlloc(kv *mvccpb.KeyValue, prefix string) error {
	a := &AllocRecord{}
	if err := decodeKV(kv, a); err != nil {
		return err
	}
	sn.built = nil
	id := string(kv.Key[len(prefix):])
	if e := sn.ns[id]; e != nil && kv.ModRevision >= e.allocRev {
		e.alloc, e.allocRev = a, kv.ModRevision
	}
	return nil
}

// cluster builds the placement view: namespaces with an allocation record
// and a known host.
func (sn *snapshot) cluster() (*placement.Cluster, error) {
	if sn.built != nil {
		return sn.built, nil
	}
	c, err := sn.build()
	sn.built = c
	return c, err
}

// build makes the placement view of the entries.
func (sn *snapshot) build() (*placement.Cluster, error) {
	hosts := make([]placement.Host, 0, len(sn.hosts))
	known := map[string]bool{}
	for _, h := range sn.hosts {
		hosts = append(hosts, placement.Host{Name: h.Name, Labels: h.Labels})
		known[h.Name] = true
	}
	nss := make([]placement.Namespace, 0, len(sn.ids))
	for _, id := range sn.ids {
		e := sn.ns[id]
		if e.alloc == nil || !known[e.rec.Host] {
			continue
		}
		nss = append(nss, PlacementNamespace(e.rec, e.alloc))
	}
	c, err := placement.NewCluster(hosts, nss, sn.domain)
	if err != nil {
		return nil, fmt.Errorf("cluster state: %w: %w", ErrCorruptRecord, err)
	}
	return c, nil
}

// PlacementNamespace is namespace n with allocation a as placement sees
// it: the one conversion of the records that every view of the cluster
// (allocation, the controller's state, the capacity report) makes. Its
// capacity is the slots of a's bitmap but the label's and its use the
// slots set there (decoding checks that they fit); it is unfenced when it
// takes no new shards (NamespaceRecord.Placeable).
func PlacementNamespace(n *NamespaceRecord, a *AllocRecord) placement.Namespace {
	st, _ := placement.ParseState(n.State) // checked when decoded
	return placement.Namespace{ID: n.ID, Host: n.Host, State: st, Capacity: a.Slots - 1, Used: a.Used, Unfenced: !n.Placeable()}
}

// errRetry asks an optimistic loop to run again.
var errRetry = errors.New("retry")

// withSnapshot runs fn on a fresh-enough snapshot under s.mu.
func (s *Store) withSnapshot(ctx context.Context, fn func(*snapshot) error) error {
	if err := s.freshSnapshot(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil {
		return errRetry // invalidated since it was loaded
	}
	return fn(s.snap)
}

// freshSnapshot makes sure s.snap is no older than SnapshotTTL, loading
// it when it is not. One caller loads; the others that find it stale
// meanwhile wait for that load (a process allocating many segments at once
// would otherwise read the whole cluster once per caller, and at 16,000
// namespaces each read is megabytes). A load overtaken by an invalidation
// is not kept: the next caller loads again.
func (s *Store) freshSnapshot(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.snap != nil && time.Since(s.snap.at) <= s.cfg.SnapshotTTL {
			s.mu.Unlock()
			return nil
		}
		if wait := s.loading; wait != nil {
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		done, gen := make(chan struct{}), s.snapGen
		s.loading = done
		s.snapLoads++
		s.mu.Unlock()
		fresh, err := s.loadSnapshot(ctx)
		s.mu.Lock()
		s.loading = nil
		close(done)
		if err == nil && gen == s.snapGen {
			s.snap = fresh
		}
		s.mu.Unlock()
		if err != nil || gen == s.snapGen {
			return err
		}
	}
}

// refresh applies key-values read by a failed transaction to the snapshot.
func (s *Store) refresh(kvs []*mvccpb.KeyValue) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil {
		return nil
	}
	for _, kv := range kvs {
		var err error
		switch key := string(kv.Key); {
		case len(key) > len(s.keys.namespaces()) && key[:len(s.keys.namespaces())] == s.keys.namespaces():
			err = s.snap.setNamespace(kv)
		case len(key) > len(s.keys.allocs()) && key[:len(s.keys.allocs())] == s.keys.allocs():
			err = s.snap.setAlloc(kv, s.keys.allocs())
		}
		if err != nil {
			return err
		}
	}
	return nil
}
