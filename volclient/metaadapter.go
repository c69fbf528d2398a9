package volclient

import (
	"context"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volume"
)

// segmentMap adapts a meta.VolumeMap to the volume engine's Allocator,
// DirtyLog, StaleLog and UnsettledLog (the two packages may not import
// each other).
type segmentMap struct{ m *meta.VolumeMap }

var (
	_ volume.Allocator = segmentMap{}
	_ volume.DirtyLog  = segmentMap{}
	_ volume.StaleLog  = segmentMap{}

	_ volume.UnsettledLog = segmentMap{}
)

func toVolume(refs []meta.SlotRef) []volume.SlotRef {
	out := make([]volume.SlotRef, len(refs))
	for i, r := range refs {
		out[i] = volume.SlotRef{NS: r.NS, Slot: r.Slot}
	}
	return out
}

func (p segmentMap) Lookup(ctx context.Context, seg int64) ([]volume.SlotRef, bool, error) {
	refs, ok, err := p.m.Lookup(ctx, seg)
	return toVolume(refs), ok, err
}

func (p segmentMap) Allocate(ctx context.Context, seg int64) ([]volume.SlotRef, error) {
	refs, err := p.m.Allocate(ctx, seg)
	return toVolume(refs), err
}

func (p segmentMap) Free(ctx context.Context, seg int64) error { return p.m.Free(ctx, seg) }

func (p segmentMap) MarkDirty(ctx context.Context, seg int64) error { return p.m.MarkDirty(ctx, seg) }

func (p segmentMap) MarkClean(ctx context.Context, segs []int64) error {
	return p.m.MarkClean(ctx, segs)
}

func (p segmentMap) Dirty(ctx context.Context) ([]int64, error) { return p.m.Dirty(ctx) }

func (p segmentMap) MarkStale(ctx context.Context, s volume.StaleSlot) error {
	var stripes [][2]int64
	for _, r := range s.Stripes {
		stripes = append(stripes, [2]int64{r.From, r.To})
	}
	return p.m.MarkStaleStripes(ctx, s.Segment, s.Slot, meta.SlotRef{NS: s.Ref.NS, Slot: s.Ref.Slot}, stripes)
}

func (p segmentMap) ClearStale(ctx context.Context, s volume.StaleSlot) error {
	return p.m.ClearStale(ctx, s.Segment, s.Slot, meta.SlotRef{NS: s.Ref.NS, Slot: s.Ref.Slot})
}

func (p segmentMap) Stale(ctx context.Context) ([]volume.StaleSlot, error) {
	marks, err := p.m.Stale(ctx)
	out := make([]volume.StaleSlot, len(marks))
	for i, m := range marks {
		out[i] = volume.StaleSlot{Segment: m.Segment, Slot: m.Index, Ref: volume.SlotRef{NS: m.Ref.NS, Slot: m.Ref.Slot}}
		for _, r := range m.Stripes {
			out[i].Stripes = append(out[i].Stripes, volume.StripeRange{From: r[0], To: r[1]})
		}
	}
	return out, err
}

func (p segmentMap) SetUnsettled(ctx context.Context, s volume.UnsettledSegment) error {
	blocks := make([][3]int64, len(s.Blocks))
	for i, b := range s.Blocks {
		blocks[i] = [3]int64{b.Stripe, int64(b.Shard), b.Row}
	}
	return p.m.SetUnsettled(ctx, s.Segment, blocks, s.More)
}

func (p segmentMap) ListUnsettled(ctx context.Context) ([]volume.UnsettledSegment, error) {
	marks, err := p.m.Unsettled(ctx)
	out := make([]volume.UnsettledSegment, len(marks))
	for i, m := range marks {
		out[i] = volume.UnsettledSegment{Segment: m.Segment, More: m.More, Blocks: make([]volume.UnsettledRow, len(m.Blocks))}
		for j, b := range m.Blocks {
			out[i].Blocks[j] = volume.UnsettledRow{Stripe: b[0], Shard: int(b[1]), Row: b[2]}
		}
	}
	return out, err
}
