//go:build !linux

package uring

// Options configures New (see the Linux implementation).
type Options struct {
	Flags     uint32
	CQEntries uint32
}

// Ring is only available on Linux.
type Ring struct{}

// New returns ErrUnsupported: io_uring exists only on Linux.
func New(entries uint32, opts *Options) (*Ring, error) { return nil, ErrUnsupported }
