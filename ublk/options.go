package ublk

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/nvstripe/nvstripe/blockdev"
)

// Options configures Start. The zero value of a field means its default.
type Options struct {
	// Queues is the number of hardware queues, each served by one goroutine
	// on its own OS thread with its own io_uring; default (and cap) the
	// number of CPUs, at most MaxQueues.
	Queues int
	// MaxQueues caps Queues when it defaults; default 4.
	MaxQueues int
	// Depth is the number of requests each queue holds at once (tags), from
	// 1 to 4096; default 64.
	Depth int
	// MaxIO is the largest request in bytes, a multiple of 4096 (one buffer of
	// this size is kept per tag); default 512 KiB.
	MaxIO int
	// ReadOnly makes the block device read-only.
	ReadOnly bool
	// Recovery adds the device with UBLK_F_USER_RECOVERY and _REISSUE: when
	// the server dies the driver keeps /dev/ublkbN and holds its IO (requests
	// the dead server had taken are issued again) until a new process takes
	// the device back with Recover, or until it is deleted (Delete).
	Recovery bool
}

func (o *Options) withDefaults(numCPU int) Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.MaxQueues == 0 {
		r.MaxQueues = 4
	}
	if r.Queues == 0 {
		r.Queues = max(1, min(numCPU, r.MaxQueues))
	}
	if r.Depth == 0 {
		r.Depth = 64
	}
	if r.MaxIO == 0 {
		r.MaxIO = 512 << 10
	}
	return r
}

// ErrBadOptions is the class of an invalid Options value.
var ErrBadOptions = errors.New("ublk: invalid options")

func (o Options) validate() error {
	switch {
	case o.Queues < 1 || o.Queues > 64:
		return fmt.Errorf("%w: Queues %d not in 1..64", ErrBadOptions, o.Queues)
	case o.Depth < 1 || o.Depth > maxDepth:
		return fmt.Errorf("%w: Depth %d not in 1..%d", ErrBadOptions, o.Depth, maxDepth)
	case o.MaxIO < 4096 || o.MaxIO%4096 != 0 || o.MaxIO > 64<<20:
		return fmt.Errorf("%w: MaxIO %d not a multiple of 4096 in 4 KiB..64 MiB", ErrBadOptions, o.MaxIO)
	}
	return nil
}

// maxDiscardSectors caps one DISCARD or WRITE_ZEROES request (1 GiB).
const maxDiscardSectors = 1 << 21

// paramsFor returns the block-layer parameters of dev: logical and physical
// block size from the device, io_opt from its optimal IO size, maximum
// request from the IO size the driver granted, a volatile cache with FUA
// (writes are acknowledged before Flush unless FUA), and discard and
// write-zeroes limits in units of the block size.
func paramsFor(dev blockdev.Device, maxIOBytes uint32, readOnly bool) (params, error) {
	bs := dev.BlockSize()
	if bs < 512 || bs > 4096 || bs&(bs-1) != 0 {
		return params{}, fmt.Errorf("%w: device block size %d is not a power of two in 512..4096", ErrBadOptions, bs)
	}
	if dev.Size()%int64(bs) != 0 || dev.Size() <= 0 {
		return params{}, fmt.Errorf("%w: device size %d is not a positive multiple of its block size %d", ErrBadOptions, dev.Size(), bs)
	}
	shift := uint8(bits.TrailingZeros(uint(bs)))
	p := params{
		attrs:        attrVolatileCache | attrFUA,
		logicalShift: shift, physicalShift: shift, ioMinShift: shift, ioOptShift: shift,
		maxSectors:         maxIOBytes >> 9,
		devSectors:         uint64(dev.Size()) >> 9,
		discardGranularity: uint32(bs),
		maxDiscard:         maxDiscardSectors,
		maxWriteZeroes:     maxDiscardSectors,
	}
	if opt := blockdev.OptimalIOSize(dev); opt > bs && uint32(opt) <= maxIOBytes {
		p.ioOptShift = uint8(bits.TrailingZeros(uint(opt)))
	}
	if readOnly {
		p.attrs |= attrReadOnly
	}
	return p, nil
}
