package faultdev_test

import (
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
)

// TestConformance runs the suite through a wrapper without rules, and through
// one whose rules never trigger (a delay of zero and a failure range that no
// call reaches are still evaluated on every call).
func TestConformance(t *testing.T) {
	newMem := func(t *testing.T, size int64) *blockdev.Mem {
		m, err := blockdev.NewMem(size, 4096)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	t.Run("NoRules", func(t *testing.T) {
		devtest.Run(t, func(t *testing.T, size int64) blockdev.Device { return faultdev.New(newMem(t, size), 1) })
	})
	t.Run("IdleRules", func(t *testing.T) {
		devtest.Run(t, func(t *testing.T, size int64) blockdev.Device {
			d := faultdev.New(newMem(t, size), 1)
			d.Add(faultdev.Rule{Action: faultdev.Delay})
			d.Add(faultdev.Rule{Ops: faultdev.OpRead, After: 1 << 30})
			d.Add(faultdev.Rule{Action: faultdev.Corrupt, Prob: 1e-12})
			return d
		})
	})
}

func TestCrashConformance(t *testing.T) {
	devtest.RunCrash(t, func(t *testing.T, size int64) (blockdev.Device, func() blockdev.Device) {
		m, err := blockdev.NewCrashableMem(size, 4096)
		if err != nil {
			t.Fatal(err)
		}
		return faultdev.New(m, 1), func() blockdev.Device { return m.CrashClone() }
	})
}
