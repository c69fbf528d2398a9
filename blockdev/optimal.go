package blockdev

import "math/bits"

// OptimalIO is the optional capability of a device whose IO is cheapest in
// requests of a given size, aligned to it: an erasure-coded volume's full
// stripe, below which a write reads old data or parity back to update the
// parity. Servers pass it on to clients that can use it (NBD's preferred
// block size, which nbdcopy and qemu size their requests by).
type OptimalIO interface {
	// OptimalIOSize returns that size in bytes, a power of two; 0 when the
	// device has none.
	OptimalIOSize() int
}

// OptimalIOSize returns d's optimal IO size (see OptimalIO), or 0 when d has
// none or reports one that is not a power of two.
func OptimalIOSize(d Device) int {
	o, ok := d.(OptimalIO)
	if !ok {
		return 0
	}
	n := o.OptimalIOSize()
	if n <= 0 || bits.OnesCount(uint(n)) != 1 {
		return 0
	}
	return n
}
