package volume

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

var g42 = layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 64 << 10}

func TestRoundTripAndZeros(t *testing.T) {
	r := newRig(t, g42, 4*g42.SegmentData(), rigOptions{})
	ctx := context.Background()
	mustEqual(t, "unallocated read", mustRead(t, r.vol, 0, 64<<10), make([]byte, 64<<10))
	data := testutil.Pattern(300<<10, 1)
	if err := r.vol.WriteAt(ctx, data, 12<<10); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "read back", mustRead(t, r.vol, 12<<10, len(data)), data)
	mustEqual(t, "before", mustRead(t, r.vol, 0, 12<<10), make([]byte, 12<<10))
	r.checkParity(t)
}

func TestBadRequests(t *testing.T) {
	r := newRig(t, g42, 2*g42.SegmentData(), rigOptions{})
	ctx := context.Background()
	size := r.vol.Size()
	cases := []struct {
		name  string
		err   error
		class error
	}{
		{"misaligned offset", r.vol.WriteAt(ctx, make([]byte, 4096), 100), blockdev.ErrInvalid},
		{"misaligned length", r.vol.ReadAt(ctx, make([]byte, 100), 0), blockdev.ErrInvalid},
		{"past end", r.vol.WriteAt(ctx, make([]byte, 8192), size-4096), blockdev.ErrOutOfRange},
		{"negative", r.vol.Trim(ctx, -4096, 4096), blockdev.ErrInvalid},
		{"zeroes past end", r.vol.WriteZeroes(ctx, size, 4096), blockdev.ErrOutOfRange},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.class) {
			t.Errorf("%s: err %v, want class %v", c.name, c.err, c.class)
		}
	}
	if r.alloc.Allocated() != 0 {
		t.Errorf("bad requests allocated %d segments", r.alloc.Allocated())
	}
	if _, err := New(Options{Geometry: g42, Size: 1000, Devices: DeviceMap{}, Alloc: r.alloc}); !errors.Is(err, blockdev.ErrInvalid) {
		t.Errorf("unaligned size: %v", err)
	}
}

// TestIOCounts pins the IO cost of the basic operations on a healthy 4+2
// volume.
func TestIOCounts(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, Chunk: 128 << 10, SlotSize: 1 << 20}
	r := newRig(t, g, g.SegmentData(), rigOptions{})
	ctx := context.Background()
	full := testutil.Pattern(int(g.StripeData()), 3)
	if err := r.vol.WriteAt(ctx, full, 0); err != nil { // allocates the segment
		t.Fatal(err)
	}
	cases := []struct {
		name          string
		do            func() error
		reads, writes int64
	}{
		{"4KiB write in one chunk", func() error { return r.vol.WriteAt(ctx, testutil.Pattern(4096, 9), 128<<10+8192) }, 3, 3},
		{"full-stripe write", func() error { return r.vol.WriteAt(ctx, full, g.StripeData()) }, 0, 6},
		{"4KiB read", func() error { return r.vol.ReadAt(ctx, make([]byte, 4096), 4096) }, 1, 0},
		{"one-chunk read", func() error { return r.vol.ReadAt(ctx, make([]byte, g.Chunk), g.Chunk) }, 1, 0},
		{"full-stripe read", func() error { return r.vol.ReadAt(ctx, make([]byte, g.StripeData()), 0) }, 4, 0},
	}
	for _, c := range cases {
		r.resetStats()
		if err := c.do(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		s := r.stats()
		if s.Reads != c.reads || s.Writes != c.writes {
			t.Errorf("%s: %d reads, %d writes; want %d, %d", c.name, s.Reads, s.Writes, c.reads, c.writes)
		}
	}
	r.checkParity(t)
}

func TestDegradedReadAndWrite(t *testing.T) {
	r := newRig(t, g42, 2*g42.SegmentData(), rigOptions{})
	ctx := context.Background()
	data := testutil.Pattern(int(2*g42.SegmentData()), 5)
	if err := r.vol.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	var degraded atomic.Int64
	r.vol.ev.Degraded = func(DegradedInfo) { degraded.Add(1) }
	r.devs[0].SetDown(true)
	r.devs[3].SetDown(true)
	mustEqual(t, "degraded read", mustRead(t, r.vol, 0, len(data)), data)
	if degraded.Load() == 0 {
		t.Error("no degraded event")
	}
	patch := testutil.Pattern(20<<10, 77)
	copy(data[40<<10:], patch)
	if err := r.vol.WriteAt(ctx, patch, 40<<10); err != nil {
		t.Fatalf("degraded write: %v", err)
	}
	mustEqual(t, "after degraded write", mustRead(t, r.vol, 0, len(data)), data)

	r.devs[5].SetDown(true) // a third shard: more than m
	err := r.vol.ReadAt(ctx, make([]byte, len(data)), 0)
	var se *StripeError
	if !errors.As(err, &se) || !errors.Is(err, blockdev.ErrUnavailable) {
		t.Fatalf("read with 3 of 6 down: %v, want *StripeError of class unavailable", err)
	}
	if err := r.vol.WriteAt(ctx, patch, 0); !errors.As(err, &se) {
		t.Fatalf("write with 3 of 6 down: %v, want *StripeError", err)
	}

	for _, i := range []int{0, 3, 5} {
		r.devs[i].SetDown(false)
		r.vol.SetNamespaceUp(r.names[i], true)
	}
	if _, err := r.vol.Repair(ctx); err != nil {
		t.Fatal(err)
	}
	r.checkParity(t)
	mustEqual(t, "after repair", mustRead(t, r.vol, 0, len(data)), data)
	// Every shard is consistent again: any two may go.
	r.devs[1].SetDown(true)
	r.devs[2].SetDown(true)
	mustEqual(t, "after repair, two others down", mustRead(t, r.vol, 0, len(data)), data)
}

func TestCorruptShardIsReconstructed(t *testing.T) {
	r := newRig(t, g42, g42.SegmentData(), rigOptions{})
	ctx := context.Background()
	data := testutil.Pattern(int(g42.SegmentData()), 8)
	if err := r.vol.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	var corrupt atomic.Int64
	r.vol.ev.Corruption = func(ShardInfo) { corrupt.Add(1) }
	r.devs[1].Add(faultFail(blockdev.ErrCorrupt))
	mustEqual(t, "read over corrupt shard", mustRead(t, r.vol, 0, len(data)), data)
	if corrupt.Load() == 0 {
		t.Error("no corruption event")
	}
	r.devs[1].Clear()
	if _, err := r.vol.Repair(ctx); err != nil {
		t.Fatal(err)
	}
	r.checkParity(t)
}

func TestTrimFreesSegments(t *testing.T) {
	r := newRig(t, g42, 3*g42.SegmentData(), rigOptions{})
	ctx := context.Background()
	sd := g42.SegmentData()
	data := testutil.Pattern(int(3*sd), 4)
	if err := r.vol.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	// Trim from the middle of segment 0 to the middle of segment 2.
	lo, hi := sd/2+4096, 2*sd+12*4096
	if err := r.vol.Trim(ctx, lo, hi-lo); err != nil {
		t.Fatal(err)
	}
	clear(data[lo:hi])
	mustEqual(t, "after trim", mustRead(t, r.vol, 0, len(data)), data)
	if n := r.alloc.Allocated(); n != 2 {
		t.Errorf("%d segments allocated after trimming one whole, want 2", n)
	}
	ext, err := r.vol.Allocated(ctx, 0, 3*sd)
	if err != nil || len(ext) != 2 || ext[0] != (blockdev.Extent{Off: 0, Len: sd}) {
		t.Errorf("Allocated = %v, %v", ext, err)
	}
	if err := r.vol.WriteZeroes(ctx, 0, sd); err != nil {
		t.Fatal(err)
	}
	clear(data[:sd])
	mustEqual(t, "after write zeroes", mustRead(t, r.vol, 0, len(data)), data)
	r.checkParity(t)
	// The freed segment is reallocated and reads zeros where not written.
	if err := r.vol.WriteAt(ctx, testutil.Pattern(4096, 1), sd+8192); err != nil {
		t.Fatal(err)
	}
	copy(data[sd+8192:], testutil.Pattern(4096, 1))
	mustEqual(t, "reallocated", mustRead(t, r.vol, 0, len(data)), data)
}

func TestFlushReachesDirtyDevices(t *testing.T) {
	r := newRig(t, g42, g42.SegmentData(), rigOptions{namespaces: 8})
	ctx := context.Background()
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := r.stats(); s.Flushes != 0 {
		t.Errorf("flush of a clean volume sent %d flushes", s.Flushes)
	}
	if err := r.vol.WriteAt(ctx, testutil.Pattern(4096, 1), 0); err != nil {
		t.Fatal(err)
	}
	r.resetStats()
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Allocation trimmed all 6 slots, and the write reached 3 of them.
	if s := r.stats(); s.Flushes != 6 {
		t.Errorf("flush sent %d device flushes, want 6", s.Flushes)
	}
}

func TestFUAReachesDevices(t *testing.T) {
	r := newRig(t, g42, g42.SegmentData(), rigOptions{crashable: true})
	ctx := context.Background()
	data := testutil.Pattern(int(g42.StripeData()), 2)
	if err := r.vol.WriteAtFUA(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	crashed := r.crash(t, ctx, nil)
	r.reopen(t, crashed)
	mustEqual(t, "FUA write after crash", mustRead(t, r.vol, 0, len(data)), data)
}

func TestTeeAndLoggingListener(t *testing.T) {
	var lines []string
	var n int
	l := TeeListener(LoggingListener(func(f string, a ...any) { lines = append(lines, f) }),
		EventListener{ShardError: func(ShardInfo) { n++ }})
	l.shardError(ShardInfo{NS: "a"})
	l.degraded(DegradedInfo{Op: "read"})
	if len(lines) != 2 || n != 1 {
		t.Fatalf("lines %v, shard errors %d", lines, n)
	}
}

func TestZeroIsFast(t *testing.T) {
	r := newRig(t, g42, g42.SegmentData(), rigOptions{})
	sd := g42.StripeData()
	cases := []struct {
		off, n int64
		fast   bool
	}{
		{0, sd, true}, {sd, 3 * sd, true}, {0, 4096, false}, {4096, sd, false}, {sd, sd + 4096, false},
	}
	for _, c := range cases {
		if got := r.vol.ZeroIsFast(c.off, c.n, true); got != c.fast {
			t.Errorf("ZeroIsFast(%d, %d) = %v, want %v", c.off, c.n, got, c.fast)
		}
	}
}

// OptimalIOSize is one stripe's data when that is a power of two (else a
// chunk), and it is the size from which writes read nothing back: an
// aligned write of that size encodes its parity from its own data, half of
// it reads old data or parity first.
// A volume is synchronous once it has opened a segment whose namespaces all
// are: plain Mems, not the rig's fault injectors (which may delay).
func TestSynchronous(t *testing.T) {
	dm, slots := DeviceMap{}, map[string]int64{}
	for i := range g42.N() {
		m, err := blockdev.NewMem(2*g42.SlotSize, 4096)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("m%d", i)
		dm[name], slots[name] = m, 2
	}
	v, err := New(Options{Geometry: g42, Size: g42.SegmentData(), Devices: dm,
		Alloc: NewMemAllocator(g42.N(), slots), Dirty: NewMemDirtyLog(), Stale: NewMemStaleLog()})
	if err != nil {
		t.Fatal(err)
	}
	if blockdev.IsSynchronous(v) {
		t.Error("synchronous before any namespace is open")
	}
	ctx := context.Background()
	if err := v.WriteAt(ctx, testutil.Pattern(4096, 1), 0); err != nil {
		t.Fatal(err)
	}
	if !blockdev.IsSynchronous(v) {
		t.Error("not synchronous over Mem namespaces")
	}
	r := newRig(t, g42, g42.SegmentData(), rigOptions{})
	if err := r.vol.WriteAt(ctx, testutil.Pattern(4096, 1), 0); err != nil {
		t.Fatal(err)
	}
	if blockdev.IsSynchronous(r.vol) {
		t.Error("synchronous over fault-injecting namespaces")
	}
}

func TestOptimalIOSize(t *testing.T) {
	g32 := layout.Geometry{K: 3, M: 2, Chunk: 16 << 10, SlotSize: 64 << 10}
	if n := newRig(t, g32, g32.SegmentData(), rigOptions{}).vol.OptimalIOSize(); n != 16<<10 {
		t.Errorf("3+2 with 16 KiB chunks: optimal IO %d, want one chunk", n)
	}
	r := newRig(t, g42, 2*g42.SegmentData(), rigOptions{})
	opt := r.vol.OptimalIOSize()
	if opt != 64<<10 || blockdev.OptimalIOSize(r.vol) != opt {
		t.Fatalf("4+2 with 16 KiB chunks: optimal IO %d, want one stripe (64 KiB)", opt)
	}
	ctx := context.Background()
	if err := r.vol.WriteAt(ctx, testutil.Pattern(int(g42.SegmentData()), 1), 0); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{opt, opt / 2} {
		r.resetStats()
		if err := r.vol.WriteAt(ctx, testutil.Pattern(n, 2), int64(3*opt)); err != nil {
			t.Fatal(err)
		}
		if reads := r.stats().Reads; (n == opt) != (reads == 0) {
			t.Errorf("aligned write of %d bytes read %d times from the namespaces", n, reads)
		}
	}
	r.checkParity(t)
}
