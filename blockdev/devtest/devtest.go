// Package devtest is the conformance suite of blockdev.Device: every
// implementation runs it (Run, or the tests of All one by one) and, when it
// can simulate a power loss, RunCrash.
//
// The suite checks what the Device contract promises: alignment and bounds
// errors that touch nothing, zero-length calls, read-your-writes, agreement
// with a flat model under a random sequence, parallel IO on disjoint ranges,
// zeros after Trim and WriteZeroes, Flush and FUA, buffer ownership, errors
// after Close, and AllocationReporter consistency when the device has it.
//
// It also has OptimalIO, a wrapper that gives a device an optimal IO size,
// for tests of the servers that pass that size on.
//
// Concurrency: the tests themselves start goroutines against one device
// (ParallelDisjoint); the suite's tests do not run in parallel with each
// other.
package devtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
)

// NewDevice returns a new, zero-filled device of exactly size bytes (size is
// a multiple of 4096). The suite closes the device itself in some tests; the
// factory should release it with t.Cleanup and tolerate a second Close.
type NewDevice func(t *testing.T, size int64) blockdev.Device

// Test is one conformance test.
type Test func(t *testing.T, newDevice NewDevice)

// DefaultSize is the size the suite asks for: a few MiB, so that requests
// cross the 1 MiB pages of Mem and similar internal boundaries.
const DefaultSize = 4 << 20

// All returns the conformance tests by name.
func All() map[string]Test {
	return map[string]Test{
		"Geometry":         testGeometry,
		"Alignment":        testAlignment,
		"Bounds":           testBounds,
		"ZeroLength":       testZeroLength,
		"ReadYourWrites":   testReadYourWrites,
		"RandomModel":      testRandomModel,
		"ParallelDisjoint": testParallelDisjoint,
		"TrimReadsZeros":   testTrim,
		"WriteZeroes":      testWriteZeroes,
		"Flush":            testFlush,
		"FUA":              testFUA,
		"BufferReuse":      testBufferReuse,
		"Close":            testClose,
		"Allocation":       testAllocation,
	}
}

// Run runs every test of All as a subtest of t, in a fixed order.
func Run(t *testing.T, newDevice NewDevice) {
	tests := All()
	for _, name := range slices.Sorted(maps.Keys(tests)) {
		t.Run(name, func(t *testing.T) { tests[name](t, newDevice) })
	}
}

// pattern returns n bytes that depend on seed and position, so that data of
// different writes and different offsets never look alike.
func pattern(seed int64, n int) []byte {
	p := make([]byte, n+7)
	x := uint64(seed)*0x9e3779b97f4a7c15 + 1
	for i := 0; i < n; i += 8 {
		x ^= x << 13 // xorshift64
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(p[i:], x)
	}
	return p[:n:n]
}

func read(t *testing.T, d blockdev.Device, off int64, n int) []byte {
	t.Helper()
	p := bytes.Repeat([]byte{0xee}, n) // never zeros: reads must overwrite
	if err := d.ReadAt(context.Background(), p, off); err != nil {
		t.Fatalf("ReadAt(off=%d, len=%d): %v", off, n, err)
	}
	return p
}

func write(t *testing.T, d blockdev.Device, p []byte, off int64) {
	t.Helper()
	if err := d.WriteAt(context.Background(), p, off); err != nil {
		t.Fatalf("WriteAt(off=%d, len=%d): %v", off, len(p), err)
	}
}

// expect fails t when the device does not hold want at off.
func expect(t *testing.T, d blockdev.Device, off int64, want []byte, what string) {
	t.Helper()
	got := read(t, d, off, len(want))
	if bytes.Equal(got, want) {
		return
	}
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("%s: byte at %d is %#x, want %#x", what, off+int64(i), got[i], want[i])
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// wantClass fails t unless err has the given class.
func wantClass(t *testing.T, err, class error, what string) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Errorf("%s: got %v, want an error of class %v", what, err, class)
	}
}

// ops returns each mutating or reading call over [off, off+n) as a closure,
// by name, for tests that check every kind of call.
func ops(d blockdev.Device, off, n int64) map[string]func() error {
	ctx := context.Background()
	buf := func() []byte {
		if n < 0 || n > 1<<30 {
			return nil
		}
		return make([]byte, n)
	}
	return map[string]func() error{
		"ReadAt":      func() error { return d.ReadAt(ctx, buf(), off) },
		"WriteAt":     func() error { return d.WriteAt(ctx, buf(), off) },
		"WriteFUA":    func() error { return blockdev.WriteFUA(ctx, d, buf(), off) },
		"WriteZeroes": func() error { return d.WriteZeroes(ctx, off, n) },
		"Trim":        func() error { return d.Trim(ctx, off, n) },
	}
}

func describe(off, n int64) string { return fmt.Sprintf("off=%d len=%d", off, n) }
