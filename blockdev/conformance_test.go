package blockdev_test

import (
	"math/rand"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
)

func newMemDevice(crashable bool) devtest.NewDevice {
	return func(t *testing.T, size int64) blockdev.Device {
		m := mustMem(t, crashable, size)
		t.Cleanup(func() { m.Close() })
		return m
	}
}

func TestConformanceMem(t *testing.T)          { devtest.Run(t, newMemDevice(false)) }
func TestConformanceCrashableMem(t *testing.T) { devtest.Run(t, newMemDevice(true)) }

func TestConformanceMem512(t *testing.T) {
	devtest.Run(t, func(t *testing.T, size int64) blockdev.Device {
		m, err := blockdev.NewMem(size, 512)
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

// TestConformanceWindow runs the suite on a window in the middle of a larger
// Mem whose bytes around the window hold data that must never change.
func TestConformanceWindow(t *testing.T) {
	devtest.Run(t, func(t *testing.T, size int64) blockdev.Device {
		const guard = 1<<20 + 4096
		m := mustMem(t, false, size+2*guard)
		outside := fill(guard, 0xa5)
		for _, off := range []int64{0, guard + size} {
			if err := m.WriteAt(t.Context(), outside, off); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			for _, off := range []int64{0, guard + size} {
				if got := readBack(t, m, off, guard); string(got) != string(outside) {
					t.Errorf("window IO changed the parent outside the window at %d", off)
				}
			}
		})
		w, err := blockdev.NewWindow(m, guard, size)
		if err != nil {
			t.Fatal(err)
		}
		return w
	})
}

func TestCrashMem(t *testing.T) {
	devtest.RunCrash(t, func(t *testing.T, size int64) (blockdev.Device, func() blockdev.Device) {
		m := mustMem(t, true, size)
		return m, func() blockdev.Device { return m.CrashClone() }
	})
}

func TestCrashMemRand(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	devtest.RunCrash(t, func(t *testing.T, size int64) (blockdev.Device, func() blockdev.Device) {
		m := mustMem(t, true, size)
		return m, func() blockdev.Device { return m.CrashCloneRand(r) }
	})
}
