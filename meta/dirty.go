package meta

import (
	"context"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// MarkDirty records that segment seg may have data and parity out of step.
// With an owner it fails with ErrLeaseLost once the owner lost its lease.
func (m *VolumeMap) MarkDirty(ctx context.Context, seg int64) error {
	if err := m.checkSeg(seg); err != nil {
		return err
	}
	rec := &DirtyRecord{}
	if m.owner != nil {
		rec.Epoch = m.owner.epoch
	}
	op, err := putOp(m.s.keys.dirty(m.name, seg), rec)
	if err != nil {
		return err
	}
	return m.fencedTxn(ctx, "mark dirty", op)
}

// MarkClean clears the dirty marks of segs (in transactions of at most
// maxTxnOps deletes).
func (m *VolumeMap) MarkClean(ctx context.Context, segs []int64) error {
	for len(segs) > 0 {
		n := min(len(segs), maxTxnOps)
		ops := make([]clientv3.Op, 0, n)
		for _, seg := range segs[:n] {
			if err := m.checkSeg(seg); err != nil {
				return err
			}
			ops = append(ops, clientv3.OpDelete(m.s.keys.dirty(m.name, seg)))
		}
		if err := m.fencedTxn(ctx, "mark clean", ops...); err != nil {
			return err
		}
		segs = segs[n:]
	}
	return nil
}

// fencedTxn runs ops if the owner (if any) still holds its key.
func (m *VolumeMap) fencedTxn(ctx context.Context, what string, ops ...clientv3.Op) error {
	resp, err := m.s.kv.Txn(ctx).If(m.ownerCmps()...).Then(ops...).Else(m.ownerGet()).Commit()
	if err != nil {
		return m.s.wrap(what+" "+m.name, err)
	}
	if !resp.Succeeded {
		if err := m.ownerLost(resp); err != nil {
			return err
		}
		return fmt.Errorf("%s %s: %w", what, m.name, ErrConflict)
	}
	return nil
}

// Dirty lists the dirty segments in ascending order.
func (m *VolumeMap) Dirty(ctx context.Context) ([]int64, error) {
	prefix := m.s.keys.dirties(m.name)
	out, _, err := listKeys(ctx, m.s, prefix, prefix, func(kv *mvccpb.KeyValue) (int64, error) {
		seg, err := segmentIndex(string(kv.Key), prefix)
		if err != nil {
			return 0, err
		}
		return seg, decodeKV(kv, &DirtyRecord{})
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}
