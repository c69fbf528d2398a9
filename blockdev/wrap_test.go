package blockdev_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
)

// wrapped returns a devtest.NewDevice that puts wrap over a Mem.
func wrapped(wrap func(blockdev.Device) blockdev.Device) devtest.NewDevice {
	return func(t *testing.T, size int64) blockdev.Device {
		m := mustMem(t, false, size)
		t.Cleanup(func() { m.Close() })
		return wrap(m)
	}
}

// The wrappers of the kit, each as a func(Device) Device.
func kitWrappers() map[string]func(blockdev.Device) blockdev.Device {
	return map[string]func(blockdev.Device) blockdev.Device{
		"Passthrough": func(d blockdev.Device) blockdev.Device { return blockdev.Passthrough{Device: d} },
		"Fence":       func(d blockdev.Device) blockdev.Device { return blockdev.NewFence(d) },
		"LeaseFence": func(d blockdev.Device) blockdev.Device {
			return blockdev.NewLeaseFence(d, func() error { return nil })
		},
		"Meter": func(d blockdev.Device) blockdev.Device { return blockdev.NewMeter(d, nil) },
		"MeterObserved": func(d blockdev.Device) blockdev.Device {
			return blockdev.NewMeter(d, func(blockdev.Op, int64, time.Duration, error) {})
		},
		"Swappable": func(d blockdev.Device) blockdev.Device { return blockdev.NewSwappable(d.Size(), d.BlockSize(), d) },
	}
}

func TestConformanceWrappers(t *testing.T) {
	for name, wrap := range kitWrappers() {
		t.Run(name, func(t *testing.T) { devtest.Run(t, wrapped(wrap)) })
	}
}

func TestWrappersPassCapabilities(t *testing.T) {
	for name, wrap := range kitWrappers() {
		t.Run(name, func(t *testing.T) {
			devtest.PassesCapabilities(t, wrap, name != "Swappable") // a Swappable is never synchronous
		})
	}
}

// everyCall returns every Device call (and Allocated) on d, by name.
func everyCall(d blockdev.Device) map[string]func() error {
	ctx, buf := context.Background(), make([]byte, 4096)
	return map[string]func() error{
		"read":  func() error { return d.ReadAt(ctx, buf, 0) },
		"write": func() error { return d.WriteAt(ctx, buf, 0) },
		"fua":   func() error { return blockdev.WriteFUA(ctx, d, buf, 0) },
		"flush": func() error { return d.Flush(ctx) },
		"trim":  func() error { return d.Trim(ctx, 0, 4096) },
		"zero":  func() error { return d.WriteZeroes(ctx, 0, 4096) },
		"alloc": func() error {
			r, ok := d.(blockdev.AllocationReporter)
			if !ok {
				return d.ReadAt(ctx, buf, 0)
			}
			_, err := r.Allocated(ctx, 0, 4096)
			return err
		},
	}
}

func TestFailing(t *testing.T) {
	cause := fmt.Errorf("target t1 unreachable: %w", blockdev.ErrUnavailable)
	d := blockdev.NewFailing(1<<20, 512, cause)
	for name, call := range everyCall(d) {
		if err := call(); err != cause {
			t.Errorf("%s: %v, want %v", name, err, cause)
		}
	}
	if d.Size() != 1<<20 || d.BlockSize() != 512 || d.Close() != nil {
		t.Errorf("size %d, block size %d", d.Size(), d.BlockSize())
	}
}

func TestFence(t *testing.T) {
	mem := mustMem(t, false, 1<<20)
	f := blockdev.NewFence(mem)
	for name, call := range everyCall(f) {
		if err := call(); err != nil {
			t.Fatalf("%s before the fence: %v", name, err)
		}
	}
	lost := errors.New("lease lost")
	f.Fence(fmt.Errorf("ownership lost: %w", lost))
	f.Fence(errors.New("a later cause")) // the first stays
	for name, call := range everyCall(f) {
		if err := call(); !errors.Is(err, blockdev.ErrFenced) || !errors.Is(err, lost) {
			t.Errorf("%s after the fence: %v, want ErrFenced citing the first cause", name, err)
		}
	}
	if f.ZeroIsFast(0, 4096, true) {
		t.Error("zeroing is fast on a fenced device")
	}
}

// duringRead is a device that runs hook while each read is in flight,
// after the bytes were read: the moment a paused process wakes up with
// the read done.
type duringRead struct {
	blockdev.Passthrough
	hook func()
}

func (d duringRead) ReadAt(ctx context.Context, p []byte, off int64) error {
	err := d.Device.ReadAt(ctx, p, off)
	d.hook()
	return err
}

// TestLeaseFenceReadCompletingLate: a read issued while the lease is held
// and completing after it may have run out fails with ErrFenced and hands
// out no byte it read; from then on every call fails. A plain fence fenced
// while a read is in flight fails that read too.
func TestLeaseFenceReadCompletingLate(t *testing.T) {
	ctx := context.Background()
	mem := mustMem(t, false, 1<<20)
	if err := mem.WriteAt(ctx, bytes.Repeat([]byte{0xAB}, 8192), 0); err != nil {
		t.Fatal(err)
	}
	lost := errors.New("no renewal sent in time")
	var expired atomic.Bool
	lease := func() error {
		if expired.Load() {
			return lost
		}
		return nil
	}
	f := blockdev.NewLeaseFence(duringRead{blockdev.Passthrough{Device: mem}, func() { expired.Store(true) }}, lease)
	buf := make([]byte, 8192)
	err := f.ReadAt(ctx, buf, 0)
	if !errors.Is(err, blockdev.ErrFenced) || !errors.Is(err, lost) {
		t.Fatalf("read completing after the lease: %v, want ErrFenced citing the lease", err)
	}
	if !bytes.Equal(buf, make([]byte, len(buf))) {
		t.Error("the read that completed too late left its bytes in the buffer")
	}
	expired.Store(false) // the first failure stays
	for name, call := range everyCall(f) {
		if err := call(); !errors.Is(err, blockdev.ErrFenced) || !errors.Is(err, lost) {
			t.Errorf("%s after the lease ran out: %v, want ErrFenced", name, err)
		}
	}

	var plain *blockdev.Fence
	plain = blockdev.NewFence(duringRead{blockdev.Passthrough{Device: mem}, func() { plain.Fence(lost) }})
	if err := plain.ReadAt(ctx, buf, 0); !errors.Is(err, blockdev.ErrFenced) {
		t.Errorf("read completing after Fence: %v, want ErrFenced", err)
	}
}

func TestMeter(t *testing.T) {
	ctx := context.Background()
	mem := mustMem(t, false, 1<<20)
	var mu sync.Mutex
	seen := map[blockdev.Op][]error{}
	var moved int64
	m := blockdev.NewMeter(mem, func(op blockdev.Op, n int64, lat time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		seen[op] = append(seen[op], err)
		moved += n
	})
	buf := make([]byte, 8192)
	for _, err := range []error{
		m.WriteAt(ctx, buf, 0), blockdev.WriteFUA(ctx, m, buf, 8192), m.ReadAt(ctx, buf, 0),
		m.Flush(ctx), m.Trim(ctx, 0, 4096), m.WriteZeroes(ctx, 0, 4096),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := m.ReadAt(ctx, buf, 1<<20); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("read past the end: %v", err)
	}
	if m.WriteBytes.Load() != 16384 || m.Writes.Load() != 2 || m.ReadBytes.Load() != 8192 || m.Reads.Load() != 2 || m.Errors.Load() != 1 {
		t.Errorf("counters: writes %d (%d B), reads %d (%d B), errors %d",
			m.Writes.Load(), m.WriteBytes.Load(), m.Reads.Load(), m.ReadBytes.Load(), m.Errors.Load())
	}
	want := map[blockdev.Op]int{blockdev.OpRead: 2, blockdev.OpWrite: 2, blockdev.OpFlush: 1, blockdev.OpTrim: 1, blockdev.OpWriteZeroes: 1}
	for op, n := range want {
		if len(seen[op]) != n {
			t.Errorf("%s observed %d times, want %d", op, len(seen[op]), n)
		}
	}
	if reads := seen[blockdev.OpRead]; len(reads) == 2 && !errors.Is(reads[1], blockdev.ErrOutOfRange) {
		t.Errorf("the observer did not see the failed read's error: %v", reads[1])
	}
	if moved != 8192*4 { // the failed read counts its size for the observer, not in ReadBytes
		t.Errorf("observer saw %d bytes", moved)
	}
}

func TestSwappable(t *testing.T) {
	ctx := context.Background()
	down := fmt.Errorf("not connected: %w", blockdev.ErrUnavailable)
	s := blockdev.NewSwappable(1<<20, 4096, blockdev.NewFailing(0, 4096, down))
	for name, call := range everyCall(s) {
		if err := call(); !errors.Is(err, blockdev.ErrUnavailable) {
			t.Errorf("%s on the stand-in: %v", name, err)
		}
	}
	mem := mustMem(t, false, 1<<20)
	if err := mem.WriteAt(ctx, fill(4096, 7), 0); err != nil {
		t.Fatal(err)
	}
	if old := s.Swap(mem); old.Size() != 0 {
		t.Errorf("Swap returned %v, want the stand-in", old)
	}
	if got := readBack(t, s, 0, 4096); string(got) != string(fill(4096, 7)) {
		t.Error("a read after the swap does not reach the new device")
	}
	if s.Size() != 1<<20 || s.Current() != blockdev.Device(mem) {
		t.Errorf("size %d, current %v", s.Size(), s.Current())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mem.ReadAt(ctx, make([]byte, 4096), 0); !errors.Is(err, blockdev.ErrUnavailable) {
		t.Errorf("Close did not close the current device: %v", err)
	}
}
