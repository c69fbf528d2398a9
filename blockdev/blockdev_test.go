package blockdev_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
)

var classes = []error{blockdev.ErrUnavailable, blockdev.ErrCorrupt, blockdev.ErrFenced, blockdev.ErrOutOfRange, blockdev.ErrInvalid, blockdev.ErrNoSpace}

func TestMarkAndClass(t *testing.T) {
	base := errors.New("nvme status 0x281")
	if blockdev.Mark(nil, blockdev.ErrCorrupt) != nil {
		t.Fatal("Mark(nil) != nil")
	}
	if blockdev.Class(base) != nil || blockdev.Class(nil) != nil {
		t.Fatal("an unmarked error has a class")
	}
	for _, c := range classes {
		m := blockdev.Mark(base, c)
		if !errors.Is(m, c) || !errors.Is(m, base) || m.Error() != base.Error() {
			t.Errorf("Mark(%v): Is class %v, Is base %v, message %q", c, errors.Is(m, c), errors.Is(m, base), m.Error())
		}
		if blockdev.Class(m) != c {
			t.Errorf("Class(Mark(err, %v)) = %v", c, blockdev.Class(m))
		}
		w := fmt.Errorf("shard 3: %w", m)
		if blockdev.Class(w) != c {
			t.Errorf("Class of a wrapped %v = %v", c, blockdev.Class(w))
		}
		if blockdev.Mark(m, c) != m {
			t.Errorf("marking twice with %v wrapped again", c)
		}
	}
	// Fenced wins over unavailable: retrying a fenced write never helps.
	both := blockdev.Mark(blockdev.Mark(base, blockdev.ErrUnavailable), blockdev.ErrFenced)
	if blockdev.Class(both) != blockdev.ErrFenced {
		t.Errorf("Class(fenced+unavailable) = %v", blockdev.Class(both))
	}
}

func TestCheckRange(t *testing.T) {
	const size, bs = 1 << 20, 4096
	for _, c := range []struct {
		off, n int64
		want   error
	}{
		{0, 0, nil}, {0, bs, nil}, {size - bs, bs, nil}, {0, size, nil}, {size, 0, nil},
		{1, bs, blockdev.ErrInvalid}, {0, 1, blockdev.ErrInvalid}, {-bs, bs, blockdev.ErrInvalid},
		{0, -bs, blockdev.ErrInvalid}, {bs, bs + 512, blockdev.ErrInvalid},
		{size, bs, blockdev.ErrOutOfRange}, {size - bs, 2 * bs, blockdev.ErrOutOfRange},
		{size + bs, 0, blockdev.ErrOutOfRange}, {bs, 1<<63 - bs + 1 - bs, blockdev.ErrInvalid},
		{bs, 1<<62 - 1<<62%bs, blockdev.ErrOutOfRange}, {1 << 62, 1 << 62, blockdev.ErrOutOfRange},
	} {
		err := blockdev.CheckRange(size, bs, c.off, c.n)
		if c.want == nil && err != nil || c.want != nil && blockdev.Class(err) != c.want {
			t.Errorf("CheckRange(off=%d, n=%d) = %v, want %v", c.off, c.n, err, c.want)
		}
	}
}

func TestWindow(t *testing.T) {
	ctx := context.Background()
	m := mustMem(t, false, 4<<20)
	for _, c := range []struct{ base, size int64 }{{-4096, 4096}, {1, 4096}, {4 << 20, 4096}, {3 << 20, 2 << 20}} {
		if _, err := blockdev.NewWindow(m, c.base, c.size); err == nil {
			t.Errorf("NewWindow(%d, %d) accepted", c.base, c.size)
		}
	}
	w, err := blockdev.NewWindow(m, 1<<20, 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	if w.Parent() != blockdev.Device(m) || w.Base() != 1<<20 || w.Size() != 2<<20 || w.BlockSize() != 4096 {
		t.Fatalf("window geometry: base %d size %d", w.Base(), w.Size())
	}
	if err := w.WriteAt(ctx, fill(4096, 9), 4096); err != nil {
		t.Fatal(err)
	}
	if got := readBack(t, m, 1<<20+4096, 4096); got[0] != 9 {
		t.Fatal("window write landed elsewhere in the parent")
	}
	ext, err := w.Allocated(ctx, 0, w.Size())
	if err != nil || len(ext) != 1 || ext[0] != (blockdev.Extent{Off: 0, Len: 1 << 20}) {
		t.Fatalf("window Allocated = %v, %v: want the first MiB in window offsets", ext, err)
	}
	if err := w.WriteAt(ctx, fill(4096, 1), 2<<20); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("write past the window end: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readBack(t, m, 1<<20+4096, 4096); got[0] != 9 {
		t.Fatal("closing the window closed the parent")
	}
}

func TestIsSynchronous(t *testing.T) {
	mem := mustMem(t, false, 1<<20)
	defer mem.Close()
	if !blockdev.IsSynchronous(mem) {
		t.Error("Mem is not synchronous")
	}
	// A wrapper that embeds the Device interface hides the capability.
	if blockdev.IsSynchronous(devtest.OptimalIO{Device: mem}) {
		t.Error("a wrapper without the method is synchronous")
	}
}

func TestOptimalIOSize(t *testing.T) {
	mem := mustMem(t, false, 1<<20)
	defer mem.Close()
	for _, tc := range []struct {
		dev  blockdev.Device
		want int
	}{
		{mem, 0},
		{devtest.OptimalIO{Device: mem, Optimal: 512 << 10}, 512 << 10},
		{devtest.OptimalIO{Device: mem, Optimal: 384 << 10}, 0}, // not a power of two
		{devtest.OptimalIO{Device: mem, Optimal: -4096}, 0},
		{devtest.OptimalIO{Device: mem, Optimal: 0}, 0},
	} {
		if got := blockdev.OptimalIOSize(tc.dev); got != tc.want {
			t.Errorf("OptimalIOSize(%T) = %d, want %d", tc.dev, got, tc.want)
		}
	}
}
