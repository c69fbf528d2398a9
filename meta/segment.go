package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nvstripe/nvstripe/placement"
)

// segChange is a read-modify-write of one segment record together with the
// allocation bitmaps of the namespaces it touches.
type segChange struct {
	rec    *SegmentRecord
	modRev int64 // the mod revision rec was read at
	del    bool  // delete the segment (and its dirty mark) instead of writing rec
	allocs map[string]*AllocRecord
	orig   map[string]*AllocRecord
	revs   map[string]int64 // mod revisions of allocs and of ns records read
}

// release frees ref in its bitmap, naming the record on a double free.
func (c *segChange) release(k keys, ref SlotRef) error {
	a := c.allocs[ref.NS]
	if a == nil {
		return fmt.Errorf("record %s missing for slot %d: %w", k.alloc(ref.NS), ref.Slot, ErrCorruptRecord)
	}
	if err := a.release(ref.Slot); err != nil {
		return fmt.Errorf("record %s: %w: %w", k.alloc(ref.NS), ErrCorruptRecord, err)
	}
	return nil
}

// touched lists the namespaces a segment record uses, plus extra.
func touched(rec *SegmentRecord, extra string) []string {
	var ids []string
	add := func(id string) {
		for _, x := range ids {
			if x == id {
				return
			}
		}
		ids = append(ids, id)
	}
	for _, r := range rec.Slots {
		add(r.NS)
	}
	if m := rec.Move; m != nil {
		add(m.To.NS)
		if m.From != nil {
			add(m.From.NS)
		}
	}
	if extra != "" {
		add(extra)
	}
	return ids
}

// change runs fn on segment seg and the bitmaps it touches (plus the one of
// namespace extra, whose namespace record must be in state "in"), and
// commits the result in one transaction comparing every revision read,
// retrying on conflict.
func (m *VolumeMap) change(ctx context.Context, seg int64, extra string, fn func(*segChange) error) error {
	for range maxRetries {
		rec, rev, readRev, err := m.segmentAt(ctx, seg)
		if err != nil {
			return err
		}
		c, err := m.readAllocs(ctx, touched(rec, extra), extra, readRev)
		if errors.Is(err, rpctypes.ErrCompacted) {
			continue
		}
		if err != nil {
			return err
		}
		c.rec, c.modRev = rec, rev
		if err := fn(c); err != nil {
			return err
		}
		done, err := m.commitChange(ctx, seg, rev, c)
		if done || err != nil {
			return err
		}
	}
	return fmt.Errorf("change %s segment %d: %w", m.name, seg, ErrConflict)
}

// readAllocs reads the bitmaps of ids (and the namespace record of extra) at
// revision rev, the revision the segment was read at, so that fn sees one
// consistent state.
func (m *VolumeMap) readAllocs(ctx context.Context, ids []string, extra string, rev int64) (*segChange, error) {
	c := &segChange{allocs: map[string]*AllocRecord{}, orig: map[string]*AllocRecord{}, revs: map[string]int64{}}
	ops := make([]clientv3.Op, 0, len(ids)+1)
	for _, id := range ids {
		ops = append(ops, clientv3.OpGet(m.s.keys.alloc(id), clientv3.WithRev(rev)))
	}
	if extra != "" {
		ops = append(ops, clientv3.OpGet(m.s.keys.namespace(extra), clientv3.WithRev(rev)))
	}
	resp, err := m.s.kv.Txn(ctx).Then(ops...).Commit()
	if errors.Is(err, rpctypes.ErrCompacted) {
		return nil, err
	}
	if err != nil {
		return nil, m.s.wrap("read allocations", err)
	}
	for i, id := range ids {
		for _, kv := range resp.Responses[i].GetResponseRange().Kvs {
			a := &AllocRecord{}
			if err := decodeKV(kv, a); err != nil {
				return nil, err
			}
			c.allocs[id], c.orig[id], c.revs[m.s.keys.alloc(id)] = a, a.clone(), kv.ModRevision
		}
	}
	if extra != "" {
		if err := m.checkTarget(resp.Responses[len(ids)].GetResponseRange().Kvs, extra, c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// checkTarget requires the move target's namespace record to exist in state
// "in" and remembers its revision for the compare.
func (m *VolumeMap) checkTarget(kvs []*mvccpb.KeyValue, id string, c *segChange) error {
	if len(kvs) == 0 {
		return classErrorf(ErrNotFound, "namespace %q not found", id)
	}
	n := &NamespaceRecord{}
	if err := decodeKV(kvs[0], n); err != nil {
		return err
	}
	if n.State != placement.StateIn.String() {
		return fmt.Errorf("namespace %s is %s, not in: %w", id, n.State, ErrInvalid)
	}
	c.revs[m.s.keys.namespace(id)] = kvs[0].ModRevision
	return nil
}

// commitChange writes a segChange; done is false when a compare failed for
// a reason other than a lost owner.
func (m *VolumeMap) commitChange(ctx context.Context, seg, rev int64, c *segChange) (done bool, err error) {
	segKey := m.s.keys.segment(m.name, seg)
	cmps := append(m.ownerCmps(), clientv3.Compare(clientv3.ModRevision(segKey), "=", rev))
	for key, r := range c.revs {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", r))
	}
	var ops []clientv3.Op
	changed := map[string]*AllocRecord{}
	for id, a := range c.allocs {
		if bytes.Equal(a.Bitmap, c.orig[id].Bitmap) {
			continue
		}
		op, err := putOp(m.s.keys.alloc(id), a)
		if err != nil {
			return false, err
		}
		ops = append(ops, op)
		changed[id] = a
	}
	if c.del {
		ops = append(ops, clientv3.OpDelete(segKey), clientv3.OpDelete(m.s.keys.dirty(m.name, seg)),
			clientv3.OpDelete(m.s.keys.staleSeg(m.name, seg), clientv3.WithPrefix()), clientv3.OpDelete(m.s.keys.unsettled(m.name, seg)))
	} else {
		op, err := putOp(segKey, c.rec)
		if err != nil {
			return false, err
		}
		ops = append(ops, op)
	}
	resp, err := m.s.kv.Txn(ctx).If(cmps...).Then(ops...).Else(m.ownerGet()).Commit()
	if err != nil {
		return false, m.s.wrap("write "+segKey, err)
	}
	if !resp.Succeeded {
		return false, m.ownerLost(resp)
	}
	m.s.applyAllocs(changed, resp.Header.Revision)
	return true, nil
}

// Free releases the segment's slots (and those of an in-flight move) and
// deletes its record and dirty mark, in one transaction. Freeing an
// unallocated segment does nothing.
func (m *VolumeMap) Free(ctx context.Context, seg int64) error {
	err := m.change(ctx, seg, "", func(c *segChange) error {
		for _, r := range c.rec.Slots {
			if err := c.release(m.s.keys, r); err != nil {
				return err
			}
		}
		if mv := c.rec.Move; mv != nil {
			extra := mv.To
			if mv.Committed() {
				extra = *mv.From
			}
			if err := c.release(m.s.keys, extra); err != nil {
				return err
			}
		}
		c.del = true
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// BeginMove reserves a slot on namespace to (or, when to is "", on one chosen
// by placement.PlanRebuild) for shard of segment seg and records the move.
// It fails with ErrBusy while another move of the segment is in flight.
func (m *VolumeMap) BeginMove(ctx context.Context, seg int64, shard int, to string) (SlotRef, error) {
	if shard < 0 || shard >= m.n {
		return SlotRef{}, fmt.Errorf("shard %d of %d: %w", shard, m.n, ErrInvalid)
	}
	if to == "" {
		var err error
		if to, err = m.planMove(ctx, seg, shard); err != nil {
			return SlotRef{}, err
		}
	}
	var ref SlotRef
	err := m.change(ctx, seg, to, func(c *segChange) error {
		if c.rec.Move != nil {
			return fmt.Errorf("segment %d: a move of shard %d is in flight: %w", seg, c.rec.Move.Shard, ErrBusy)
		}
		for _, r := range c.rec.Slots {
			if r.NS == to {
				return fmt.Errorf("segment %d already has a shard on %s: %w", seg, to, ErrInvalid)
			}
		}
		slot := c.allocs[to].take()
		if slot < 0 {
			return fmt.Errorf("namespace %s: %w", to, placement.ErrNoSpace)
		}
		ref = SlotRef{NS: to, Slot: slot}
		c.rec.Move = &MoveRecord{Shard: shard, To: ref}
		return nil
	})
	return ref, err
}

func (m *VolumeMap) planMove(ctx context.Context, seg int64, shard int) (string, error) {
	rec, _, err := m.segment(ctx, seg)
	if err != nil {
		return "", err
	}
	shards := make([]string, len(rec.Slots))
	for i, r := range rec.Slots {
		shards[i] = r.NS
	}
	var to string
	err = m.s.withSnapshot(ctx, func(sn *snapshot) error {
		c, err := sn.cluster()
		if err != nil {
			return err
		}
		to, err = placement.PlanRebuild(c, shards, shard, placement.Options{Seed: placement.SegmentSeed(m.name, seg), AllowSharedDomains: m.share})
		return err
	})
	return to, err
}

// CommitMove records the moved shard's new slot (the segment's version
// grows); the old slot stays reserved until FinishMove.
func (m *VolumeMap) CommitMove(ctx context.Context, seg int64) error {
	return m.change(ctx, seg, "", func(c *segChange) error {
		mv := c.rec.Move
		if mv == nil || mv.Committed() {
			return fmt.Errorf("segment %d has no uncommitted move: %w", seg, ErrInvalid)
		}
		from := c.rec.Slots[mv.Shard]
		c.rec.Slots[mv.Shard], mv.From = mv.To, &from
		c.rec.Ver++
		return nil
	})
}

// FinishMove releases the old slot of a committed move and clears the move.
// While a reader of the volume may still read the old slot (follow.go) it
// changes nothing and fails with a *ReadersBehindError (ErrReadersBehind);
// FinishMoveFollowed waits for them.
func (m *VolumeMap) FinishMove(ctx context.Context, seg int64) error {
	return m.endMove(ctx, seg, true)
}

// AbortMove releases the reserved slot of an uncommitted move and clears it;
// the segment keeps its old placement.
func (m *VolumeMap) AbortMove(ctx context.Context, seg int64) error {
	return m.endMove(ctx, seg, false)
}

func (m *VolumeMap) endMove(ctx context.Context, seg int64, committed bool) error {
	return m.change(ctx, seg, "", func(c *segChange) error {
		mv := c.rec.Move
		if mv == nil || mv.Committed() != committed {
			return fmt.Errorf("segment %d has no move in that phase (committed=%v): %w", seg, committed, ErrInvalid)
		}
		free := mv.To
		if committed {
			free = *mv.From
			// The record last changed at the commit: nothing but the end
			// of the move rewrites a segment with a committed move.
			behind, rev, err := m.readersBehind(ctx, c.modRev)
			if err != nil {
				return err
			}
			if len(behind) > 0 {
				return &ReadersBehindError{Volume: m.name, Segment: seg, Commit: c.modRev, Rev: rev, Readers: behind}
			}
		}
		c.rec.Move = nil
		return c.release(m.s.keys, free)
	})
}
