package meta

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Unsettled blocks (the volume engine's UnsettledLog): 4 KiB data blocks
// no recovery could settle (a crash mid-write plus the loss of a
// namespace) that a move or rebuild carried over blank; they read as
// corrupt until their stripe is written whole or `nvstripe volume settle`
// resets them. The owner records a segment's blocks under
// unsettled/<volume>/<segment, 16 hex digits>, fenced by its lease,
// rewriting the record whole at each change, and a new owner loads them
// at open: its resync marks the segment clean, after which only this
// record tells the blanks from bad media. Freeing the segment or deleting
// the volume deletes it.

func (k keys) allUnsettled() string         { return k.root + "unsettled/" }
func (k keys) unsettleds(vol string) string { return k.allUnsettled() + vol + "/" }
func (k keys) unsettled(vol string, seg int64) string {
	return fmt.Sprintf("%s%016x", k.unsettleds(vol), seg)
}

// MaxUnsettledBlocks bounds the blocks one unsettled record lists (the
// volume engine bounds those of a whole volume the same way).
const MaxUnsettledBlocks = 4096

// UnsettledRecord lists the unsettled blocks of one segment, and the owner
// epoch that wrote it.
type UnsettledRecord struct {
	versioned
	Epoch int64 `json:"epoch"`
	// Blocks are [stripe, data shard, block of the chunk] triples, sorted
	// and distinct.
	Blocks [][3]int64 `json:"blocks"`
	// More: the segment has unsettled blocks past those listed (its owner
	// reached the volume's cap); `volume settle` finds them.
	More bool `json:"more,omitempty"`
}

func (r *UnsettledRecord) check() error {
	if err := checkUnsettledBlocks(r.Blocks); err != nil {
		return fmt.Errorf("unsettled record: %w: %w", err, ErrCorruptRecord)
	}
	if len(r.Blocks) == 0 && !r.More {
		return fmt.Errorf("unsettled record: lists nothing: %w", ErrCorruptRecord)
	}
	return nil
}

// checkUnsettledBlocks checks that bs are at most MaxUnsettledBlocks
// sorted, distinct triples of non-negative numbers.
func checkUnsettledBlocks(bs [][3]int64) error {
	if len(bs) > MaxUnsettledBlocks {
		return fmt.Errorf("%d unsettled blocks, at most %d", len(bs), MaxUnsettledBlocks)
	}
	for i, b := range bs {
		if b[0] < 0 || b[1] < 0 || b[2] < 0 {
			return fmt.Errorf("unsettled block %v: negative", b)
		}
		if i > 0 && slices.Compare(bs[i-1][:], b[:]) >= 0 {
			return fmt.Errorf("unsettled blocks %v and %v: not sorted and distinct", bs[i-1], b)
		}
	}
	return nil
}

// UnsettledMark is a segment's unsettled record as listed.
type UnsettledMark struct {
	Segment int64      `json:"segment"`
	Blocks  [][3]int64 `json:"blocks"` // [stripe, data shard, block of the chunk]
	More    bool       `json:"more,omitempty"`
}

// SetUnsettled replaces the unsettled record of segment seg: blocks
// ([stripe, data shard, block of the chunk], sorted, distinct) and more;
// none and not more deletes it. With an owner it fails with ErrLeaseLost
// once the owner lost its lease.
func (m *VolumeMap) SetUnsettled(ctx context.Context, seg int64, blocks [][3]int64, more bool) error {
	if err := m.checkSeg(seg); err != nil {
		return err
	}
	if err := checkUnsettledBlocks(blocks); err != nil {
		return fmt.Errorf("segment %d: %w: %w", seg, err, ErrInvalid)
	}
	key := m.s.keys.unsettled(m.name, seg)
	if len(blocks) == 0 && !more {
		return m.fencedTxn(ctx, "clear unsettled blocks", clientv3.OpDelete(key))
	}
	rec := &UnsettledRecord{Blocks: blocks, More: more}
	if m.owner != nil {
		rec.Epoch = m.owner.epoch
	}
	op, err := putOp(key, rec)
	if err != nil {
		return err
	}
	return m.fencedTxn(ctx, "record unsettled blocks", op)
}

// Unsettled lists the volume's unsettled records in segment order.
func (m *VolumeMap) Unsettled(ctx context.Context) ([]UnsettledMark, error) {
	prefix := m.s.keys.unsettleds(m.name)
	resp, err := m.s.kv.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, m.s.wrap("list "+prefix, err)
	}
	out := make([]UnsettledMark, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		seg, err := segmentIndex(string(kv.Key), prefix)
		if err != nil {
			return nil, err
		}
		var rec UnsettledRecord
		if err := decodeKV(kv, &rec); err != nil {
			return nil, err
		}
		out = append(out, UnsettledMark{Segment: seg, Blocks: rec.Blocks, More: rec.More})
	}
	return out, nil
}

// UnsettledCount sums a volume's unsettled records: Blocks listed, and
// More when some segment has blocks past those.
type UnsettledCount struct {
	Blocks int  `json:"blocks"`
	More   bool `json:"more,omitempty"`
}

// countUnsettled sums marks.
func countUnsettled(marks []UnsettledMark) UnsettledCount {
	var c UnsettledCount
	for _, m := range marks {
		c.Blocks += len(m.Blocks)
		c.More = c.More || m.More
	}
	return c
}

// Advice says how many blocks of volume vol are unsettled and what to do
// about them, for people; "" when none.
func (c UnsettledCount) Advice(vol string) string {
	if c.Blocks == 0 && !c.More {
		return ""
	}
	n := fmt.Sprint(c.Blocks)
	if c.More {
		n = fmt.Sprintf("at least %d", c.Blocks+1)
	}
	return fmt.Sprintf("unsettled %s blocks (4 KiB each) read as corrupt (lost in a crash mid-write and a namespace loss): `nvstripe volume settle %s` (unmapped) resets them to zeros", n, vol)
}

// UnsettledCounts sums the unsettled records of every volume that has
// some, in one paged range read.
func (s *Store) UnsettledCounts(ctx context.Context) (map[string]UnsettledCount, error) {
	base := s.keys.allUnsettled()
	out := map[string]UnsettledCount{}
	_, err := s.rangePrefix(ctx, base, func(kv *mvccpb.KeyValue) error {
		vol, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), base), "/")
		if _, err := segmentIndex(string(kv.Key), s.keys.unsettleds(vol)); err != nil {
			return err
		}
		var rec UnsettledRecord
		if err := decodeKV(kv, &rec); err != nil {
			return err
		}
		c := out[vol]
		c.Blocks += len(rec.Blocks)
		c.More = c.More || rec.More
		out[vol] = c
		return nil
	})
	return out, err
}

// WriteUnsettled prints a line for each volume of counts with unsettled
// blocks, in name order, saying what settles them (under `nvstripe volume
// ls`).
func WriteUnsettled(w io.Writer, counts map[string]UnsettledCount) error {
	for _, vol := range slices.Sorted(maps.Keys(counts)) {
		if line := counts[vol].Advice(vol); line != "" {
			if _, err := fmt.Fprintf(w, "volume %s: %s\n", vol, line); err != nil {
				return err
			}
		}
	}
	return nil
}
