package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nvstripe/nvstripe/placement"
)

// VolumeMap is one volume's placement in etcd: the volume engine's
// Allocator (Lookup, Allocate, Free) and DirtyLog (MarkDirty, MarkClean,
// Dirty), plus segment moves. When it has an Owner, every change also
// compares the owner's key, so an owner that lost its lease cannot change
// anything (ErrLeaseLost). It is safe for concurrent use.
type VolumeMap struct {
	s       *Store
	name    string
	n       int          // shards per segment, K+M
	seg     atomic.Int64 // segments the volume has; grows (Grow)
	segData int64        // data bytes per segment
	share   bool
	owner   *Owner
}

// VolumeMap opens the placement of a volume. owner may be nil for tools
// that must not be fenced (tests, admin repair); the engine passes its Owner.
func (s *Store) VolumeMap(ctx context.Context, name string, owner *Owner) (*VolumeMap, error) {
	m, _, err := s.volumeMap(ctx, name, owner)
	return m, err
}

// volumeMap is VolumeMap that also returns the volume's record.
func (s *Store) volumeMap(ctx context.Context, name string, owner *Owner) (*VolumeMap, *VolumeRecord, error) {
	v, err := s.Volume(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	c, err := s.Cluster(ctx)
	if err != nil {
		return nil, nil, err
	}
	segData := v.Layout.Geometry(c.SlotSize).SegmentData()
	m := &VolumeMap{s: s, name: name, n: v.Layout.K + v.Layout.M, owner: owner, segData: segData, share: v.AllowSharedDomains}
	m.Grow(v.Size)
	return m, v, nil
}

// Grow lets the map reach the segments of the volume grown to size bytes
// (its record was resized); a smaller size changes nothing.
func (m *VolumeMap) Grow(size int64) {
	n := (size + m.segData - 1) / m.segData
	for {
		old := m.seg.Load()
		if n <= old || m.seg.CompareAndSwap(old, n) {
			return
		}
	}
}

// ownerCmps returns the comparison that fences writes to the owner's epoch.
func (m *VolumeMap) ownerCmps() []clientv3.Cmp {
	if m.owner == nil {
		return nil
	}
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(m.owner.key), "=", m.owner.epoch)}
}

// ownerLost reports whether the owner's key is gone from a failed
// transaction's read of it (the first Else response).
func (m *VolumeMap) ownerLost(resp *clientv3.TxnResponse) error {
	if m.owner == nil {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 || kvs[0].CreateRevision != m.owner.epoch {
		return fmt.Errorf("volume %s epoch %d: %w", m.name, m.owner.epoch, ErrLeaseLost)
	}
	return nil
}

// ownerGet is the Else read that ownerLost inspects.
func (m *VolumeMap) ownerGet() clientv3.Op {
	if m.owner == nil {
		return clientv3.OpGet(m.s.keys.volume(m.name), clientv3.WithCountOnly())
	}
	return clientv3.OpGet(m.owner.key)
}

func (m *VolumeMap) checkSeg(seg int64) error {
	if n := m.seg.Load(); seg < 0 || seg >= n {
		return fmt.Errorf("volume %s has segments 0..%d, not %d: %w", m.name, n-1, seg, ErrInvalid)
	}
	return nil
}

// Lookup returns the slots of segment seg; ok is false when it is not
// allocated.
func (m *VolumeMap) Lookup(ctx context.Context, seg int64) ([]SlotRef, bool, error) {
	rec, _, err := m.segment(ctx, seg)
	if errors.Is(err, ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return slices.Clone(rec.Slots), true, nil
}

// Segment reads the full segment record (ErrNotFound when unallocated).
func (m *VolumeMap) Segment(ctx context.Context, seg int64) (*SegmentRecord, error) {
	rec, _, err := m.segment(ctx, seg)
	return rec, err
}

func (m *VolumeMap) segment(ctx context.Context, seg int64) (*SegmentRecord, int64, error) {
	rec, rev, _, err := m.segmentAt(ctx, seg)
	return rec, rev, err
}

// segmentAt reads segment seg and returns it with its mod revision and the
// revision of the read.
func (m *VolumeMap) segmentAt(ctx context.Context, seg int64) (rec *SegmentRecord, modRev, readRev int64, err error) {
	if err := m.checkSeg(seg); err != nil {
		return nil, 0, 0, err
	}
	key := m.s.keys.segment(m.name, seg)
	resp, err := m.s.kv.Get(ctx, key)
	if err != nil {
		return nil, 0, 0, m.s.wrap("read "+m.s.keys.describe(key), err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, resp.Header.Revision, classErrorf(ErrNotFound, "%s not found", m.s.keys.describe(key))
	}
	rec = &SegmentRecord{}
	if err := decodeKV(resp.Kvs[0], rec); err != nil {
		return nil, 0, 0, err
	}
	if len(rec.Slots) != m.n {
		return nil, 0, 0, fmt.Errorf("record %s: %d slots for a %d-shard layout: %w", key, len(rec.Slots), m.n, ErrCorruptRecord)
	}
	return rec, resp.Kvs[0].ModRevision, resp.Header.Revision, nil
}

// Segments reads every allocated segment of the volume, by index.
func (m *VolumeMap) Segments(ctx context.Context) (map[int64]*SegmentRecord, int64, error) {
	prefix := m.s.keys.segments(m.name)
	resp, err := m.s.kv.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, m.s.wrap("list the segments of volume "+m.name, err)
	}
	out := make(map[int64]*SegmentRecord, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		i, rec, err := segmentKV(kv, prefix)
		if err != nil {
			return nil, 0, err
		}
		out[i] = rec
	}
	return out, resp.Header.Revision, nil
}

// segmentKV decodes the segment record kv, a key under prefix (a volume's).
func segmentKV(kv *mvccpb.KeyValue, prefix string) (int64, *SegmentRecord, error) {
	i, err := segmentIndex(string(kv.Key), prefix)
	if err != nil {
		return 0, nil, err
	}
	rec := &SegmentRecord{}
	if err := decodeKV(kv, rec); err != nil {
		return 0, nil, err
	}
	return i, rec, nil
}

// Allocate places segment seg: it reserves one slot on each of K+M
// namespaces chosen by placement and records the segment, in one
// transaction. It is idempotent: an allocated segment returns its slots.
// Errors: placement's ErrNoSpace / ErrNotEnoughDomains, ErrLeaseLost,
// ErrConflict after too many lost races.
func (m *VolumeMap) Allocate(ctx context.Context, seg int64) ([]SlotRef, error) {
	if err := m.checkSeg(seg); err != nil {
		return nil, err
	}
	for range maxRetries {
		slots, err := m.tryAllocate(ctx, seg)
		if errors.Is(err, errRetry) {
			continue
		}
		return slots, err
	}
	return nil, fmt.Errorf("allocate %s segment %d: %w", m.name, seg, ErrConflict)
}

// pick is one planned allocation: the new bitmaps and what they were read at.
type pick struct {
	slots  []SlotRef
	allocs []*AllocRecord
	cmps   []clientv3.Cmp
	reads  []clientv3.Op
}

func (m *VolumeMap) tryAllocate(ctx context.Context, seg int64) ([]SlotRef, error) {
	if slots, ok, err := m.Lookup(ctx, seg); err != nil || ok {
		return slots, err
	}
	var p *pick
	err := m.s.withSnapshot(ctx, func(sn *snapshot) error {
		var err error
		p, err = m.plan(sn, seg)
		return err
	})
	if err != nil {
		return nil, err
	}
	segKey := m.s.keys.segment(m.name, seg)
	ops := []clientv3.Op{}
	for i, a := range p.allocs {
		op, err := putOp(m.s.keys.alloc(p.slots[i].NS), a)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	op, err := putOp(segKey, &SegmentRecord{Slots: p.slots, Ver: 1})
	if err != nil {
		return nil, err
	}
	cmps := append(m.ownerCmps(), clientv3.Compare(clientv3.CreateRevision(segKey), "=", 0),
		clientv3.Compare(clientv3.Version(m.s.keys.volume(m.name)), ">", 0))
	resp, err := m.s.kv.Txn(ctx).If(append(cmps, p.cmps...)...).Then(append(ops, op)...).
		Else(append([]clientv3.Op{m.ownerGet()}, p.reads...)...).Commit()
	if err != nil {
		return nil, m.s.wrap("allocate "+segKey, err)
	}
	if resp.Succeeded {
		changed := make(map[string]*AllocRecord, len(p.slots))
		for i, r := range p.slots {
			changed[r.NS] = p.allocs[i]
		}
		m.s.applyAllocs(changed, resp.Header.Revision)
		return p.slots, nil
	}
	if err := m.ownerLost(resp); err != nil {
		return nil, err
	}
	var kvs []*mvccpb.KeyValue
	for _, r := range resp.Responses[1:] {
		kvs = append(kvs, r.GetResponseRange().Kvs...)
	}
	if err := m.s.refresh(kvs); err != nil {
		return nil, err
	}
	return nil, errRetry // the segment may exist now: the next try looks first
}

// plan chooses namespaces and slots for seg from the snapshot.
// REQUIRES: s.mu held (called from withSnapshot).
func (m *VolumeMap) plan(sn *snapshot, seg int64) (*pick, error) {
	c, err := sn.cluster()
	if err != nil {
		return nil, err
	}
	ids, err := placement.PlanSegment(c, m.n, placement.Options{Seed: placement.SegmentSeed(m.name, seg), AllowSharedDomains: m.share})
	if err != nil {
		return nil, fmt.Errorf("allocate %s segment %d: %w", m.name, seg, err)
	}
	p := &pick{}
	for _, id := range ids {
		e := sn.ns[id]
		a := e.alloc.clone()
		slot := a.take()
		if slot < 0 {
			return nil, fmt.Errorf("namespace %s: bitmap full although %d slots are counted free: %w", id, e.alloc.Slots-1-e.alloc.Used, ErrCorruptRecord)
		}
		nsKey, allocKey := m.s.keys.namespace(id), m.s.keys.alloc(id)
		p.slots = append(p.slots, SlotRef{NS: id, Slot: slot})
		p.allocs = append(p.allocs, a)
		p.cmps = append(p.cmps, clientv3.Compare(clientv3.ModRevision(nsKey), "=", e.nsRev),
			clientv3.Compare(clientv3.ModRevision(allocKey), "=", e.allocRev))
		p.reads = append(p.reads, clientv3.OpGet(nsKey), clientv3.OpGet(allocKey))
	}
	return p, nil
}

// applyAllocs records bitmaps committed at revision rev in the snapshot.
func (s *Store) applyAllocs(changed map[string]*AllocRecord, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil {
		return
	}
	for id, a := range changed {
		if e := s.snap.ns[id]; e != nil && e.allocRev < rev {
			s.snap.recount(id, e.alloc, a)
			e.alloc, e.allocRev = a.clone(), rev
		}
	}
}

// recount carries namespace id's allocation count from old to now into
// the built placement view (dropped when that fails).
// REQUIRES: s.mu held.
func (sn *snapshot) recount(id string, old, now *AllocRecord) {
	if sn.built == nil {
		return
	}
	var err error
	switch {
	case old == nil:
		sn.built = nil
	case now.Used > old.Used:
		for range now.Used - old.Used {
			err = errors.Join(err, sn.built.Reserve(id))
		}
	case now.Used < old.Used:
		for range old.Used - now.Used {
			err = errors.Join(err, sn.built.Release(id))
		}
	}
	if err != nil {
		sn.built = nil
	}
}
