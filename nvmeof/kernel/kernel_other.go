//go:build !linux

package kernel

import (
	"fmt"
	"runtime"

	"github.com/nvstripe/nvstripe/blockdev"
)

// list has no sysfs to read outside Linux.
func list(Options) ([]Namespace, error) {
	return nil, blockdev.Mark(fmt.Errorf("kernel: namespace discovery needs Linux sysfs (running on %s): %w",
		runtime.GOOS, ErrNoNVMe), blockdev.ErrUnavailable)
}
