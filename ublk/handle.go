package ublk

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/nvstripe/nvstripe/blockdev"
)

// serve runs one request against dev with buf as the tag's data buffer and
// returns the result to commit: the byte count for READ and WRITE, 0 for the
// others, or a negated errno (see errnoOf).
func serve(ctx context.Context, dev blockdev.Device, r request, buf []byte, readOnly bool) int32 {
	off, n := int64(r.start)<<9, int64(r.sectors)<<9
	var err error
	switch r.op {
	case opRead:
		if n > int64(len(buf)) {
			return -int32(syscall.EINVAL)
		}
		err = dev.ReadAt(ctx, buf[:n], off)
	case opWrite:
		if n > int64(len(buf)) {
			return -int32(syscall.EINVAL)
		}
		err = writeOp(ctx, dev, r, readOnly, func() error {
			if r.flags&ioFlagFUA != 0 {
				return blockdev.WriteFUA(ctx, dev, buf[:n], off)
			}
			return dev.WriteAt(ctx, buf[:n], off)
		})
	case opFlush:
		err = dev.Flush(ctx)
	case opDiscard:
		err = writeOp(ctx, dev, r, readOnly, func() error { return dev.Trim(ctx, off, n) })
	case opWriteZeroes:
		err = writeOp(ctx, dev, r, readOnly, func() error {
			if r.flags&ioFlagNoUnmap != 0 {
				return dev.WriteZeroes(ctx, off, n)
			}
			return dev.Trim(ctx, off, n) // reads as zeros afterwards, and may free space
		})
	default:
		return -int32(syscall.EOPNOTSUPP)
	}
	if err != nil {
		return errnoOf(err)
	}
	if r.op == opRead || r.op == opWrite {
		return int32(n)
	}
	return 0
}

// writeOp runs a modifying request: refused on a read-only device, and
// followed by Flush when FUA is set and the op is not a FUA write itself.
func writeOp(ctx context.Context, dev blockdev.Device, r request, readOnly bool, do func() error) error {
	if readOnly {
		return fmt.Errorf("write to a read-only device: %w", errReadOnly)
	}
	if err := do(); err != nil {
		return err
	}
	if r.flags&ioFlagFUA != 0 && r.op != opWrite {
		return dev.Flush(ctx)
	}
	return nil
}

var errReadOnly = errors.New("read-only")

// errnoOf maps a device error to the negated errno the block layer sees:
// ErrFenced and a write to a read-only device: EPERM (a refusal, not a media
// error, as the NBD server answers); ErrInvalid and ErrOutOfRange: EINVAL;
// ErrNoSpace (the storage behind is full): ENOSPC;
// everything else (ErrUnavailable, ErrCorrupt, cancelled IO): EIO.
func errnoOf(err error) int32 {
	switch {
	case errors.Is(err, blockdev.ErrFenced), errors.Is(err, errReadOnly):
		return -int32(syscall.EPERM)
	case errors.Is(err, blockdev.ErrInvalid), errors.Is(err, blockdev.ErrOutOfRange):
		return -int32(syscall.EINVAL)
	case errors.Is(err, blockdev.ErrNoSpace):
		return -int32(syscall.ENOSPC)
	default:
		return -int32(syscall.EIO)
	}
}
