package blockdev_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
)

// tmpfsDir returns a temporary directory on tmpfs (/dev/shm), where a File
// writes through a memory mapping, or skips.
func tmpfsDir(t *testing.T) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err != nil || st.Type != 0x01021994 {
		t.Skip("needs /dev/shm on tmpfs")
	}
	dir, err := os.MkdirTemp("/dev/shm", "blockdev-map-")
	if err != nil {
		t.Skipf("needs a writable /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestConformanceFileMapped(t *testing.T) {
	for _, direct := range []blockdev.DirectMode{blockdev.DirectOff, blockdev.DirectAuto} {
		devtest.Run(t, func(t *testing.T, size int64) blockdev.Device {
			f := openFile(t, filepath.Join(tmpfsDir(t), "dev"), &blockdev.FileOptions{Size: size, Direct: direct, Sparse: true})
			if !f.Mapped() {
				t.Fatal("a file on tmpfs is not mapped")
			}
			return f
		})
	}
}

func TestFileNoMap(t *testing.T) {
	f := openFile(t, filepath.Join(tmpfsDir(t), "dev"), &blockdev.FileOptions{Size: 1 << 20, NoMap: true})
	if f.Mapped() {
		t.Fatal("NoMap: the file is mapped")
	}
	g := openFile(t, filepath.Join(t.TempDir(), "dev"), &blockdev.FileOptions{Size: 1 << 20})
	var st syscall.Statfs_t
	if err := syscall.Statfs(g.Path(), &st); err == nil && st.Type != 0x01021994 && g.Mapped() {
		t.Fatal("a file off tmpfs is mapped")
	}
}

// A write through the mapping that faults (here: the file was shrunk
// behind the File's back, so the mapped pages past the end are gone) is
// done again with pwrite instead of crashing the process.
func TestFileMappedWriteFault(t *testing.T) {
	ctx := context.Background()
	f := openFile(t, filepath.Join(tmpfsDir(t), "dev"), &blockdev.FileOptions{Size: 1 << 20, Sparse: true})
	if !f.Mapped() {
		t.Fatal("a file on tmpfs is not mapped")
	}
	if err := os.Truncate(f.Path(), 4096); err != nil {
		t.Fatal(err)
	}
	// 8 KiB goes with copy(), 128 KiB with non-temporal stores.
	for i, n := range []int{8 << 10, 128 << 10} {
		want := bytes.Repeat([]byte{byte(0xA5 + i)}, n)
		off := int64(256<<10) * int64(i+1)
		if err := f.WriteAt(ctx, want, off); err != nil {
			t.Fatalf("write of %d bytes past the shrunk end: %v", n, err)
		}
		got := make([]byte, n)
		if err := f.ReadAt(ctx, got, off); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%d bytes written after the fault read back wrong", n)
		}
	}
}

// Reads of a sparse mapped file leave its holes unallocated (a read
// through the mapping would allocate every page it touches) and return
// what was written.
func TestFileMappedReadKeepsHoles(t *testing.T) {
	ctx := context.Background()
	f := openFile(t, filepath.Join(tmpfsDir(t), "dev"), &blockdev.FileOptions{Size: 4 << 20, Sparse: true})
	want := bytes.Repeat([]byte{0x5A}, 8192)
	if err := f.WriteAt(ctx, want, 1<<20); err != nil {
		t.Fatal(err)
	}
	blocks := func() int64 {
		var st syscall.Stat_t
		if err := syscall.Stat(f.Path(), &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks
	}
	before := blocks()
	got := make([]byte, 256<<10)
	for off := int64(0); off < 4<<20; off += int64(len(got)) {
		if err := f.ReadAt(ctx, got, off); err != nil {
			t.Fatal(err)
		}
	}
	if after := blocks(); after != before {
		t.Fatalf("reading the file allocated it: %d blocks before, %d after", before, after)
	}
	small := make([]byte, len(want))
	if err := f.ReadAt(ctx, small, 1<<20); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(small, want) {
		t.Fatal("mapped read differs from what was written")
	}
}

// Lend gives the mapped file's own bytes of a range that is in memory,
// and nothing for a hole, a bad range, an unmapped or a closed File.
func TestFileLend(t *testing.T) {
	ctx := context.Background()
	dir := tmpfsDir(t)
	f, err := blockdev.OpenFile(filepath.Join(dir, "dev"), &blockdev.FileOptions{Size: 1 << 20, Sparse: true})
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte{0x3C}, 128<<10)
	if err := f.WriteAt(ctx, want, 256<<10); err != nil {
		t.Fatal(err)
	}
	b, release, ok := f.Lend(256<<10, 128<<10)
	if !ok || !bytes.Equal(b, want) {
		t.Fatalf("Lend of written data: ok %v, equal %v", ok, ok && bytes.Equal(b, want))
	}
	release()
	for _, c := range []struct{ off, n int64 }{{0, 4096}, {256 << 10, 132 << 10}, {1 << 20, 4096}, {-4096, 4096}, {100, 4096}, {0, 0}} {
		if _, _, ok := f.Lend(c.off, c.n); ok {
			t.Errorf("Lend(%d, %d) lent a hole or a bad range", c.off, c.n)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := f.Lend(256<<10, 4096); ok {
		t.Error("a closed File lent its bytes")
	}
	g := openFile(t, filepath.Join(dir, "nomap"), &blockdev.FileOptions{Size: 1 << 20, NoMap: true})
	if err := g.WriteAt(ctx, want, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := g.Lend(0, 4096); ok {
		t.Error("an unmapped File lent its bytes")
	}
}
