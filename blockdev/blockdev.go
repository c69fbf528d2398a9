// Package blockdev is the IO seam every layer of nvstripe shares: the Device
// interface, its error classes, and small helpers (Window) over it.
//
// A Device is a fixed-size array of bytes addressed in blocks. Volumes,
// NVMe/TCP initiators, kernel namespaces, files and in-memory devices all
// implement it; the NBD server, the FUSE file and the NVMe/TCP target serve
// any Device.
//
// Wrappers are built from one kit (wrap.go): Passthrough forwards every
// optional capability, and Fence (fail every call once ownership is lost),
// Meter (count calls and bytes, observe latency), Swappable (replace the
// device behind while in use) and Failing (fail every call) build on it.
//
// Concurrency: every Device method may be called from many goroutines at
// once. Requests on overlapping ranges that run concurrently complete in an
// unspecified order; the caller orders them if it cares.
package blockdev

import (
	"context"
	"errors"
	"fmt"
)

// Device is a block device of fixed size.
//
// Alignment: off and len(p) (or n) of every call must be multiples of
// BlockSize(); a misaligned call fails with an error of class ErrInvalid and
// touches nothing. A call that reaches past Size() fails with ErrOutOfRange
// and touches nothing. A zero-length call succeeds and does nothing.
//
// Results: there are no partial results. ReadAt fills all of p or returns an
// error; after an error the contents of p are unspecified. WriteAt either
// returns nil, meaning every byte was accepted by the device, or an error,
// after which the range holds the old data, the new data, or a mix of the two
// at block granularity (a torn write), never anything else.
//
// Buffers: the device uses p only until the call returns; it never keeps p
// and never modifies p in WriteAt. Callers may reuse p at once.
//
// Durability: data accepted by WriteAt may sit in a volatile cache. Flush
// returns nil only when every write that returned nil before Flush was called
// is durable (survives power loss). WriteAt through the FUAWriter capability is
// durable when it returns.
//
// Trim (discard) and WriteZeroes: after either returns nil, reads of the range
// return zeros. Trim may release the space (thin devices); WriteZeroes may
// too, but the range stays readable as zeros in both cases.
//
// Errors carry one of the classes below, tested with errors.Is:
//   - ErrUnavailable: the device (or its path) cannot serve IO now; the data
//     may still exist. A volume treats the shard as missing and reconstructs.
//   - ErrCorrupt: the device answered but the data is known wrong (checksum,
//     media error). A volume reconstructs and rewrites.
//   - ErrFenced: this client is no longer allowed to write (lost ownership);
//     retrying will not help.
//   - ErrOutOfRange: the request reaches past Size().
//   - ErrInvalid: misaligned or otherwise malformed request.
//   - ErrNoSpace: a write, zeroing or flush failed because the storage
//     behind the device has no space left (a thin file on a full file
//     system, a full thin pool). The device is reachable and what it held
//     before stays readable; the failed request's range holds old data, new
//     data or a mix, as after any failed write. Freeing space helps;
//     retrying at once does not.
//
// Close releases the device's resources; calls after Close fail with
// ErrUnavailable.
type Device interface {
	ReadAt(ctx context.Context, p []byte, off int64) error
	WriteAt(ctx context.Context, p []byte, off int64) error
	Flush(ctx context.Context) error
	WriteZeroes(ctx context.Context, off, n int64) error
	Trim(ctx context.Context, off, n int64) error
	// Size is the device size in bytes, a multiple of BlockSize. It does not
	// change while the device is open.
	Size() int64
	// BlockSize is the logical block size in bytes: a power of two from 512
	// to 4096.
	BlockSize() int
	Close() error
}

// FUAWriter is the optional capability of writing with Force Unit Access: the
// data is durable when WriteAtFUA returns nil. Devices without it get
// WriteAt followed by Flush (see WriteFUA).
type FUAWriter interface {
	WriteAtFUA(ctx context.Context, p []byte, off int64) error
}

// Extent is a byte range of a device.
type Extent struct {
	Off, Len int64
}

// AllocationReporter is the optional capability of a thin device to say which
// parts of a range hold allocated data. Allocated returns the allocated extents
// inside [off, off+n), in order; everything else reads as zeros.
type AllocationReporter interface {
	Allocated(ctx context.Context, off, n int64) ([]Extent, error)
}

// FastZeroer is the optional capability of a device to say whether making
// [off, off+n) read as zeros (by Trim when mayTrim, else by WriteZeroes) is
// much cheaper than writing zeros. Servers use it to honour "fail fast
// rather than write zeros" requests (NBD_CMD_FLAG_FAST_ZERO).
type FastZeroer interface {
	ZeroIsFast(off, n int64, mayTrim bool) bool
}

// Lender is the optional capability of a device whose data lies in memory
// the process can map (File on tmpfs): Lend returns the device's own bytes
// of [off, off+n) for a caller that hands them straight to the kernel (a
// socket write) instead of reading them into a buffer first, and release,
// to call once the kernel is done with them. ok is false where ReadAt must
// be used. The bytes are the device's, not a copy: a write to the range
// before release shows through, as it would in a read racing that write.
// Touch them only through system calls: a page trimmed meanwhile faults
// in user space. Close waits for every release.
type Lender interface {
	Lend(off, n int64) (b []byte, release func(), ok bool)
}

// Synchronous is the optional capability of a device whose IO completes on
// the calling goroutine without waiting for anything (an in-memory copy).
// Callers that fan IO out to goroutines to overlap waiting may run such IO
// in line instead: the goroutines would cost more than they overlap.
// A wrapper that may wait (a fault injector's delay, a test gate) must not
// pass it on.
type Synchronous interface {
	Synchronous() bool
}

// IsSynchronous reports whether d has the Synchronous capability and says
// true.
func IsSynchronous(d Device) bool {
	s, ok := d.(Synchronous)
	return ok && s.Synchronous()
}

// WriteFUA writes p at off durably, with the device's FUA capability when it
// has one and with WriteAt plus Flush otherwise.
func WriteFUA(ctx context.Context, d Device, p []byte, off int64) error {
	if f, ok := d.(FUAWriter); ok {
		return f.WriteAtFUA(ctx, p, off)
	}
	if err := d.WriteAt(ctx, p, off); err != nil {
		return err
	}
	return d.Flush(ctx)
}

// Error classes. Test with errors.Is; attach with Mark.
var (
	ErrUnavailable = errors.New("device unavailable")
	ErrCorrupt     = errors.New("data corrupt")
	ErrFenced      = errors.New("fenced: no longer allowed to write")
	ErrOutOfRange  = errors.New("out of range")
	ErrInvalid     = errors.New("invalid request")
	ErrNoSpace     = errors.New("no space left on device")
)

// Mark returns err with class attached: errors.Is(Mark(err, c), c) is true,
// and the message and the rest of the chain of err are kept. Mark(nil, c) is
// nil.
func Mark(err, class error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, class) {
		return err
	}
	return &marked{err: err, class: class}
}

type marked struct {
	err, class error
}

func (m *marked) Error() string { return m.err.Error() }
func (m *marked) Unwrap() []error {
	return []error{m.err, m.class}
}

// Class returns the first class err belongs to, or nil when it has none.
func Class(err error) error {
	for _, c := range []error{ErrFenced, ErrOutOfRange, ErrInvalid, ErrNoSpace, ErrCorrupt, ErrUnavailable} {
		if errors.Is(err, c) {
			return c
		}
	}
	return nil
}

// CheckRange validates a request of n bytes at off against a device of the
// given size and block size, returning an ErrInvalid or ErrOutOfRange error
// that names the request, or nil.
func CheckRange(size int64, blockSize int, off, n int64) error {
	bs := int64(blockSize)
	if off < 0 || n < 0 || off%bs != 0 || n%bs != 0 {
		return fmt.Errorf("request off=%d len=%d not aligned to block size %d: %w", off, n, bs, ErrInvalid)
	}
	if off > size || n > size-off {
		return fmt.Errorf("request off=%d len=%d past device end %d: %w", off, n, size, ErrOutOfRange)
	}
	return nil
}
