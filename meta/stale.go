package meta

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Stale slot marks (the volume engine's StaleLog): a slot that missed a
// write because its namespace was unreachable holds old data, and a later
// owner must not read it. The owner records the slot under
// stale/<volume>/<segment, 16 hex digits>/<slot index> with the slot's
// location before it acknowledges the write, and deletes the record once the
// slot is rebuilt; freeing the segment deletes its marks. A slot that only
// missed some stripes (its namespace ran out of space) is recorded with
// those stripes; a record without them covers the whole slot (and is what
// a reader that does not know the list sees).

func (k keys) allStales() string        { return k.root + "stale/" }
func (k keys) stales(vol string) string { return k.allStales() + vol + "/" }
func (k keys) staleSeg(vol string, seg int64) string {
	return fmt.Sprintf("%s%016x/", k.stales(vol), seg)
}
func (k keys) stale(vol string, seg int64, idx int) string {
	return fmt.Sprintf("%s%d", k.staleSeg(vol, seg), idx)
}

// StaleRecord is one stale slot mark: the location the slot had when it
// missed a write, and the owner epoch that recorded it.
type StaleRecord struct {
	versioned
	NS    string `json:"ns"`
	Slot  int64  `json:"slot"`
	Epoch int64  `json:"epoch"`
	// Stripes, when set, are the only stripes the slot missed, as sorted,
	// disjoint [from, to) pairs.
	Stripes [][2]int64 `json:"stripes,omitempty"`
}

// MaxStaleRanges bounds the stripe ranges of one stale record.
const MaxStaleRanges = 4096

func (r *StaleRecord) check() error {
	if r.NS == "" || r.Slot < 0 {
		return fmt.Errorf("stale record: empty namespace or negative slot: %w", ErrCorruptRecord)
	}
	if err := checkStripes(r.Stripes); err != nil {
		return fmt.Errorf("stale record: %w: %w", err, ErrCorruptRecord)
	}
	return nil
}

// checkStripes checks that rs are at most MaxStaleRanges sorted, disjoint,
// non-empty [from, to) ranges of non-negative stripes.
func checkStripes(rs [][2]int64) error {
	if len(rs) > MaxStaleRanges {
		return fmt.Errorf("%d stripe ranges, at most %d", len(rs), MaxStaleRanges)
	}
	prev := int64(0)
	for i, r := range rs {
		if r[0] < prev || r[0] >= r[1] || i > 0 && r[0] == prev {
			return fmt.Errorf("stripe ranges %v not sorted, disjoint and non-empty", rs)
		}
		prev = r[1]
	}
	return nil
}

// StaleMark is a stale slot mark as listed. Stripes, when set, are the only
// stripes the slot missed ([from, to) pairs); nil means the whole slot.
type StaleMark struct {
	Segment int64
	Index   int
	Ref     SlotRef
	Stripes [][2]int64
}

// MarkStale records that slot idx of segment seg, at ref, missed a write.
// With an owner it fails with ErrLeaseLost once the owner lost its lease.
func (m *VolumeMap) MarkStale(ctx context.Context, seg int64, idx int, ref SlotRef) error {
	return m.MarkStaleStripes(ctx, seg, idx, ref, nil)
}

// MarkStaleStripes is MarkStale for the stripes ([from, to) pairs) the
// slot missed; it replaces the slot's mark. Nil stripes mean the whole slot.
func (m *VolumeMap) MarkStaleStripes(ctx context.Context, seg int64, idx int, ref SlotRef, stripes [][2]int64) error {
	if err := m.checkSeg(seg); err != nil {
		return err
	}
	if err := checkStripes(stripes); err != nil {
		return fmt.Errorf("segment %d slot %d: %w: %w", seg, idx, err, ErrInvalid)
	}
	rec := &StaleRecord{NS: ref.NS, Slot: ref.Slot, Stripes: stripes}
	if m.owner != nil {
		rec.Epoch = m.owner.epoch
	}
	op, err := putOp(m.s.keys.stale(m.name, seg, idx), rec)
	if err != nil {
		return err
	}
	return m.fencedTxn(ctx, "mark stale", op)
}

// ClearStale deletes the mark of slot idx of segment seg if it names ref
// (a mark recorded for another location of the slot stays).
func (m *VolumeMap) ClearStale(ctx context.Context, seg int64, idx int, ref SlotRef) error {
	key := m.s.keys.stale(m.name, seg, idx)
	resp, err := m.s.kv.Get(ctx, key)
	if err != nil {
		return m.s.wrap("read "+key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	var rec StaleRecord
	if err := decodeKV(resp.Kvs[0], &rec); err != nil {
		return err
	}
	if rec.NS != ref.NS || rec.Slot != ref.Slot {
		return nil
	}
	cmp := clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)
	_, err = m.s.kv.Txn(ctx).If(append(m.ownerCmps(), cmp)...).Then(clientv3.OpDelete(key)).Commit()
	return m.s.wrap("clear stale "+key, err)
}

// Stale lists the volume's stale slot marks.
func (m *VolumeMap) Stale(ctx context.Context) ([]StaleMark, error) {
	prefix := m.s.keys.stales(m.name)
	marks, _, err := listKeys(ctx, m.s, prefix, prefix, func(kv *mvccpb.KeyValue) (StaleMark, error) { return staleKV(kv, prefix) })
	return marks, err
}

// staleKV decodes the stale mark kv, a key under prefix (a volume's).
func staleKV(kv *mvccpb.KeyValue, prefix string) (StaleMark, error) {
	segKey, idxStr, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
	idx, err := strconv.Atoi(idxStr)
	if !ok || err != nil || idx < 0 {
		return StaleMark{}, fmt.Errorf("key %q: not a stale slot key: %w", kv.Key, ErrCorruptRecord)
	}
	seg, err := segmentIndex(prefix+segKey, prefix)
	if err != nil {
		return StaleMark{}, err
	}
	var rec StaleRecord
	if err := decodeKV(kv, &rec); err != nil {
		return StaleMark{}, err
	}
	return StaleMark{Segment: seg, Index: idx, Ref: SlotRef{NS: rec.NS, Slot: rec.Slot}, Stripes: rec.Stripes}, nil
}
