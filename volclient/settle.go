package volclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/meta"
)

// Settle opens volume name as its owner (it must not be mapped), resets to
// zeros every block that cannot be read back (volume.Volume.Settle: the
// blocks a recovery left unsettled after a crash mid-write and a namespace
// loss, and any other lost beyond what parity rebuilds), and closes it. It
// returns the volume offsets of the 4 KiB blocks it reset. progress (nil:
// none) hears stripes done of the total.
func Settle(ctx context.Context, store *meta.Store, name string, o OpenOptions, progress func(done, total int64)) ([]int64, error) {
	m, err := OpenVolume(ctx, store, name, o)
	if errors.Is(err, meta.ErrBusy) {
		return nil, fmt.Errorf("%w: settle needs the volume alone: unmap it (`nvstripe unmap %s`), settle, then map it again", err, name)
	}
	if err != nil {
		return nil, err
	}
	last := m.Volume.Geometry().Segments(m.Volume.Size()) - 1
	reset, err := m.Volume.Settle(ctx, 0, last, progress)
	if blockdev.Class(err) == blockdev.ErrUnavailable {
		err = fmt.Errorf("%w: blocks of a namespace that cannot be reached are away, not lost: bring it back, or let the controller rebuild its slots, then settle again", err)
	}
	if cerr := m.Close(context.WithoutCancel(ctx)); err == nil && cerr != nil {
		err = fmt.Errorf("closing %s after settling %d blocks: %w", name, len(reset), cerr)
	}
	return reset, err
}

// settleHint tells what to do about n unsettled blocks of volume name ("" for none).
func settleHint(name string, n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (they read as corrupt: `nvstripe volume settle %s` resets them to zeros)", name)
}
