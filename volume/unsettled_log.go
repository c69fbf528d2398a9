package volume

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// UnsettledLog records durably which blocks are unsettled, segment by
// segment, so that a new owner knows them: a move or rebuild carries such
// blocks over blank, a new owner's Recover resyncs the segment and marks it
// clean, and without the record nothing would tell the blanks from bad
// media (a scrub counted each row as three bad blocks, at every scrub).
// Blocks a recovery finds unsettled are not recorded until a rebuild
// writes them blank: their segment stays dirty and the next owner's
// recovery decides them again from the shards as they are (and settles
// them when it reaches a namespace this owner was cut off from).
// The owner rewrites a segment's record whole, fenced by its lease, before
// the rebuild that wrote the blanks returns, and before a write of a
// whole stripe that settles some of them starts (a crash between the two
// then forgets blocks still unsettled, which read as corrupt all the same,
// rather than remembering settled ones, which a later `volume settle`
// would reset). A record with no blocks and not More deletes it.
type UnsettledLog interface {
	SetUnsettled(ctx context.Context, s UnsettledSegment) error
	ListUnsettled(ctx context.Context) ([]UnsettledSegment, error)
}

// UnsettledSegment is the record of segment Segment: its unsettled data
// blocks in order, and More when it has others past those listed (the
// volume's cap, MaxRecordedUnsettled, was reached: a scrub counts those
// as bad blocks and `volume settle` finds and resets them).
type UnsettledSegment struct {
	Segment int64
	Blocks  []UnsettledRow
	More    bool
}

// UnsettledRow is block Row (4 KiB, of the chunk) of data shard Shard of
// stripe Stripe of a segment.
type UnsettledRow struct {
	Stripe int64
	Shard  int
	Row    int64
}

// MaxRecordedUnsettled bounds the unsettled blocks one volume records in
// its UnsettledLog (a few tens of KiB of etcd records at most). Past it,
// the segments whose blocks did not fit are recorded with More.
const MaxRecordedUnsettled = 4096

func compareRows(a, b UnsettledRow) int {
	return cmp.Or(cmp.Compare(a.Stripe, b.Stripe), cmp.Compare(a.Shard, b.Shard), cmp.Compare(a.Row, b.Row))
}

// MemUnsettledLog is an in-memory UnsettledLog (tests; it survives a
// simulated crash of the devices as an etcd-backed one survives a real one).
type MemUnsettledLog struct {
	mu   sync.Mutex
	segs map[int64]UnsettledSegment
}

var _ UnsettledLog = (*MemUnsettledLog)(nil)

// NewMemUnsettledLog returns an empty in-memory unsettled log.
func NewMemUnsettledLog() *MemUnsettledLog {
	return &MemUnsettledLog{segs: map[int64]UnsettledSegment{}}
}

func (l *MemUnsettledLog) SetUnsettled(_ context.Context, s UnsettledSegment) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(s.Blocks) == 0 && !s.More {
		delete(l.segs, s.Segment)
		return nil
	}
	s.Blocks = slices.Clone(s.Blocks)
	l.segs[s.Segment] = s
	return nil
}

func (l *MemUnsettledLog) ListUnsettled(context.Context) ([]UnsettledSegment, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]UnsettledSegment, 0, len(l.segs))
	for _, s := range l.segs {
		s.Blocks = slices.Clone(s.Blocks)
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b UnsettledSegment) int { return cmp.Compare(a.Segment, b.Segment) })
	return out, nil
}

type nopUnsettledLog struct{}

func (nopUnsettledLog) SetUnsettled(context.Context, UnsettledSegment) error { return nil }
func (nopUnsettledLog) ListUnsettled(context.Context) ([]UnsettledSegment, error) {
	return nil, nil
}

// LoadUnsettled reads the UnsettledLog into the volume's unsettled blocks
// (Volume.Unsettled lists them, reads of them fail with class ErrCorrupt,
// scrubs leave their rows alone), once: the owner calls it at open, before
// anything moves a slot; Recover calls it too. A record that names a block
// outside the geometry fails it with ErrInvalid.
func (v *Volume) LoadUnsettled(ctx context.Context) error {
	p := &v.poisoned
	p.logMu.Lock()
	defer p.logMu.Unlock()
	if p.loaded {
		return nil
	}
	segs, err := v.readUnsettled(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.add(segs)
	for _, s := range segs {
		p.recorded[s.Segment] = len(s.Blocks)
	}
	p.loaded = true
	return nil
}

// FollowUnsettled adds the blocks the UnsettledLog records now to the
// volume's unsettled blocks: the view of a read-only mapping, which the
// owner's rebuilds change under it. A rebuild writes an unsettled block
// blank and records it before its move commits, so a reader that calls
// this at open and again before it follows each move (volclient's
// follower) knows every blank it can reach: reads of them fail with class
// ErrCorrupt instead of returning the blank. It never forgets a block (a
// settled one reads as corrupt to this reader until it opens the volume
// again): an error, never a blank, when in doubt.
func (v *Volume) FollowUnsettled(ctx context.Context) error {
	segs, err := v.readUnsettled(ctx)
	if err != nil {
		return err
	}
	p := &v.poisoned
	p.mu.Lock()
	defer p.mu.Unlock()
	p.add(segs)
	return nil
}

// readUnsettled lists the UnsettledLog's records and checks them.
func (v *Volume) readUnsettled(ctx context.Context) ([]UnsettledSegment, error) {
	segs, err := v.unsettledLog.ListUnsettled(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the unsettled blocks: %w", err)
	}
	for _, s := range segs {
		if err := v.checkUnsettled(s); err != nil {
			return nil, err
		}
	}
	return segs, nil
}

// add makes the blocks of the records segs unsettled blanks (and their
// segments More where they say so). REQUIRES: p.mu held.
func (p *poisonSet) add(segs []UnsettledSegment) {
	p.init()
	for _, s := range segs {
		for _, b := range s.Blocks {
			k := poisonKey{layout.StripeID{Segment: s.Segment, Stripe: b.Stripe}, b.Shard}
			p.rows[k], p.blank[k] = union(p.rows[k], []int64{b.Row}), union(p.blank[k], []int64{b.Row})
		}
		if s.More {
			p.more[s.Segment] = true
		}
	}
	p.any.Store(len(p.rows) > 0 || len(p.unsynced) > 0)
}

// checkUnsettled checks that the record s names blocks of data shards
// inside the volume's geometry.
func (v *Volume) checkUnsettled(s UnsettledSegment) error {
	for _, b := range s.Blocks {
		if s.Segment < 0 || b.Stripe < 0 || b.Stripe >= v.g.StripesPerSegment() || b.Shard < 0 || b.Shard >= v.g.K ||
			b.Row < 0 || b.Row >= v.g.BlocksPerChunk() {
			return fmt.Errorf("unsettled record of segment %d: block %+v is not a data block of the volume's layout: %w",
				s.Segment, b, blockdev.ErrInvalid)
		}
	}
	return nil
}

// UnsettledMore reports whether the volume has unsettled blocks that
// Unsettled does not list: a record loaded said so (its owner reached
// MaxRecordedUnsettled), or this owner found more than it records.
func (v *Volume) UnsettledMore() bool {
	p := &v.poisoned
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.more) > 0 {
		return true
	}
	n := 0
	for _, rows := range p.blank {
		n += len(rows)
	}
	return n > cmp.Or(p.limit, MaxRecordedUnsettled)
}

// changeUnsettled applies change to the unsettled blocks and, when it
// reports a change (or the last rewrite of the segment's record failed),
// rewrites the record of segment seg in the UnsettledLog before it
// returns. Updates are serialised, so that the last record written is the
// latest state.
func (v *Volume) changeUnsettled(ctx context.Context, seg int64, change func(p *poisonSet) bool) error {
	p := &v.poisoned
	p.logMu.Lock()
	defer p.logMu.Unlock()
	p.mu.Lock()
	p.init()
	changed := change(p) || p.unsynced[seg]
	p.any.Store(len(p.rows) > 0 || len(p.unsynced) > 0)
	rec := p.record(seg)
	p.mu.Unlock()
	if !changed {
		return nil
	}
	err := v.unsettledLog.SetUnsettled(context.WithoutCancel(ctx), rec)
	p.mu.Lock()
	if err != nil {
		p.unsynced[seg] = true // the next change of the segment rewrites it
	} else {
		delete(p.unsynced, seg)
	}
	p.any.Store(len(p.rows) > 0 || len(p.unsynced) > 0)
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("segment %d: recording its %d unsettled blocks: %w", seg, len(rec.Blocks), err)
	}
	return nil
}

// forgetUnsettled forgets every unsettled block of segment seg, those past
// the record's list (More) included: the segment was freed, or settled
// whole (Settle).
func (v *Volume) forgetUnsettled(ctx context.Context, seg int64) error {
	return v.changeUnsettled(ctx, seg, func(p *poisonSet) bool {
		changed := p.more[seg] || p.recorded[seg] > 0
		delete(p.more, seg)
		for k := range p.rows {
			if k.id.Segment == seg {
				_, recorded := p.blank[k]
				delete(p.rows, k)
				delete(p.blank, k)
				changed = changed || recorded
			}
		}
		return changed
	})
}
