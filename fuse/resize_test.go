//go:build linux

package fuse

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
)

// growable returns a device of size bytes that can grow to max bytes
// (Swappable.Resize), its max bytes filled with a pattern.
func growable(t *testing.T, size, max int64) (*blockdev.Swappable, []byte) {
	t.Helper()
	m := newMem(t, max, 4096)
	data := testutil.Pattern(int(max), 7)
	if err := m.WriteAt(t.Context(), data, 0); err != nil {
		t.Fatal(err)
	}
	return blockdev.NewSwappable(size, 4096, m), data
}

func statSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestResized: after the device grows, stat shows the old size (the
// kernel's cached attributes) until Resized, then the new one, and reads
// reach past the old end, through a file opened before the resize too.
func TestResized(t *testing.T) {
	requireFUSE(t)
	const old, grown = 1 << 20, 3 << 20
	dev, data := growable(t, old, grown)
	fsys, dir := mount(t, map[string]blockdev.Device{"vol": dev}, nil)
	path := filepath.Join(dir, "vol")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A short read makes the kernel drop the attributes: the stat after it
	// caches them.
	if n, err := f.ReadAt(make([]byte, 4096), old); n != 0 {
		t.Fatalf("read at the old end before the resize: %d bytes, %v", n, err)
	}
	if got := statSize(t, path); got != old {
		t.Fatalf("stat before the resize: %d bytes, want %d", got, old)
	}
	dev.Resize(grown)
	if got := statSize(t, path); got != old {
		t.Fatalf("stat after the device grew, before Resized: %d bytes; the kernel no longer caches attributes, so this test shows nothing", got)
	}
	if err := fsys.Resized("vol"); err != nil {
		t.Fatal(err)
	}
	if got := statSize(t, path); got != grown {
		t.Fatalf("stat after Resized: %d bytes, want %d", got, grown)
	}
	got := make([]byte, 64<<10)
	if n, err := f.ReadAt(got, old-4096); n != len(got) || !bytes.Equal(got, data[old-4096:old-4096+len(got)]) {
		t.Fatalf("read across the old end: %d bytes, %v, equal %v", n, err, bytes.Equal(got[:n], data[old-4096:old-4096+n]))
	}
	if err := fsys.Resized("nope"); !errors.Is(err, blockdev.ErrInvalid) {
		t.Fatalf("Resized of a file not in the mount: %v, want ErrInvalid", err)
	}
}

// TestResizedUnseen: Resized of a file the kernel never looked up succeeds
// (the kernel has nothing of it to drop), and the first stat shows the new
// size.
func TestResizedUnseen(t *testing.T) {
	requireFUSE(t)
	dev, _ := growable(t, 1<<20, 2<<20)
	fsys, dir := mount(t, map[string]blockdev.Device{"vol": dev, "other": newMem(t, 1<<20, 4096)}, nil)
	dev.Resize(2 << 20)
	if err := fsys.Resized("vol"); err != nil {
		t.Fatal(err)
	}
	if got := statSize(t, filepath.Join(dir, "vol")); got != 2<<20 {
		t.Fatalf("stat: %d bytes, want %d", got, 2<<20)
	}
}
