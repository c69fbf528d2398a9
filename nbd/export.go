package nbd

import (
	"context"
	"sync"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// FastZeroer is blockdev.FastZeroer, kept under this name for callers.
type FastZeroer = blockdev.FastZeroer

// minBlock is the minimum block size the server advertises and the
// alignment every request must have.
const minBlock = 512

// export is the served state of one Export, shared by all its connections.
type export struct {
	name string
	Export
	bio *blockdev.ByteIO
	// conns counts the connections in transmission on this export.
	conns sync.WaitGroup
	// ctx is cancelled when the export is removed; its connections end.
	ctx    context.Context
	cancel context.CancelFunc
	// gone is set (REQUIRES: Server.mu held) once the export is removed.
	gone bool
}

func newExport(name string, e Export, bufs *bufPool) *export {
	x := &export{name: name, Export: e, bio: blockdev.NewByteIO(e.Device)}
	x.ctx, x.cancel = context.WithCancel(context.Background())
	return x
}

// closeLocked marks the export removed and ends its connections.
// REQUIRES: Server.mu held.
func (e *export) closeLocked() {
	e.gone = true
	e.cancel()
}

// flags returns the transmission flags of the export.
func (e *export) flags(structured bool) proto.TransmissionFlags {
	f := proto.FlagHasFlags | proto.FlagSendFlush | proto.FlagCanMultiConn | proto.FlagSendCache
	if structured {
		f |= proto.FlagSendDF
	}
	if e.ReadOnly {
		return f | proto.FlagReadOnly
	}
	return f | proto.FlagSendFUA | proto.FlagSendTrim | proto.FlagSendWriteZeroes | proto.FlagSendFastZero
}

// blockSize is what NBD_INFO_BLOCK_SIZE advertises. The preferred size is
// the device's optimal IO size (blockdev.OptimalIO: a volume's full stripe)
// when it has one that fits in a request, so that clients that size their
// requests by it (nbdcopy, qemu) write whole stripes; else the device block
// size, at least 4096.
func (e *export) blockSize(maxRequest int) proto.BlockSize {
	pref := max(4096, e.Device.BlockSize())
	if o := blockdev.OptimalIOSize(e.Device); o > pref && o <= maxRequest {
		pref = o
	}
	return proto.BlockSize{Min: minBlock, Preferred: uint32(pref), Max: uint32(maxRequest)}
}
