//go:build !mutant_stale_read

package agent

import "github.com/nvstripe/nvstripe/blockdev"

// mutate returns the device a mapping serves, as it is. A build with the
// tag mutant_stale_read (a test-only mutant, mutant_stale_read.go) serves
// one stale read instead: the fault campaign builds it to show that its
// history check catches a read that returns an older value.
func mutate(dev blockdev.Device) blockdev.Device { return dev }
