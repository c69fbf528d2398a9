package devtest

import "github.com/nvstripe/nvstripe/blockdev"

// OptimalIO wraps a Device and reports Optimal as its optimal IO size
// (blockdev.OptimalIO, as a volume reports its stripe), for tests of the
// code that passes that size on.
type OptimalIO struct {
	blockdev.Device
	Optimal int
}

// OptimalIOSize implements blockdev.OptimalIO.
func (o OptimalIO) OptimalIOSize() int { return o.Optimal }
