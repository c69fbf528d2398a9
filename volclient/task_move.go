package volclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume"
)

// MoveShardPaced is MoveShard with pacing: pace (nil: none) is called
// before each stripe with the bytes it will write, and may slow the move
// down or fail it. The crash-safe sequence is MoveShard's: BeginMove, copy
// or reconstruct with writes reaching both slots, CommitMove once the new
// slot is complete and flushed, FinishMove once every reader of the volume
// follows the new placement (meta.VolumeMap.FinishMoveFollowed); AbortMove
// on failure.
func (m *Mapped) MoveShardPaced(ctx context.Context, seg int64, idx int, to string,
	pace func(ctx context.Context, n int64) error, progress func(MoveProgress)) error {
	rec, err := m.Map.Segment(ctx, seg)
	if err != nil {
		return err
	}
	if idx < 0 || idx >= len(rec.Slots) {
		return fmt.Errorf("segment %d: shard %d of %d: %w", seg, idx, len(rec.Slots), blockdev.ErrInvalid)
	}
	dst, err := m.Map.BeginMove(ctx, seg, idx, to)
	if err != nil {
		return fmt.Errorf("segment %d shard %d: reserving a destination: %w", seg, idx, err)
	}
	p := MoveProgress{Segment: seg, Shard: idx, From: rec.Slots[idx], To: dst}
	err = m.Volume.MoveSlot(ctx, seg, idx, volume.SlotRef{NS: dst.NS, Slot: dst.Slot}, volume.MoveOptions{
		Commit: func(ctx context.Context) error { return m.Map.CommitMove(ctx, seg) },
		Pace:   pace,
		Progress: func(done, total int64) {
			if progress != nil {
				p.Done, p.Total = done, total
				progress(p)
			}
		},
	})
	if err != nil {
		if aerr := m.Map.AbortMove(context.WithoutCancel(ctx), seg); aerr != nil {
			err = errors.Join(err, fmt.Errorf("releasing the reserved slot: %w (ResumeMoves will)", aerr))
		}
	} else {
		// Readers of the volume may still read the old slot: it is
		// released once they all follow (the committed move keeps it
		// reserved meanwhile, for whoever settles it if this stops).
		err = m.Map.FinishMoveFollowed(ctx, seg)
	}
	if progress != nil {
		p.Finished, p.Err = true, err
		progress(p)
	}
	return err
}
