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

// WriteAtFUA lands the bytes on every path a File takes: through the
// mapping (tmpfs), with pwritev2 and RWF_DSYNC (tmpfs without the
// mapping; a file elsewhere, with O_DIRECT where the file system takes it),
// and from a buffer O_DIRECT cannot use as it is (the bounce buffers);
// what a read of the file by another descriptor sees is the same.
func TestFileWriteAtFUA(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		dir  func(*testing.T) string
		o    blockdev.FileOptions
	}{
		{"tmpfs mapped", tmpfsDir, blockdev.FileOptions{}},
		{"tmpfs not mapped", tmpfsDir, blockdev.FileOptions{NoMap: true}},
		{"disk direct", func(t *testing.T) string { return t.TempDir() }, blockdev.FileOptions{Direct: blockdev.DirectAuto}},
		{"disk buffered", func(t *testing.T) string { return t.TempDir() }, blockdev.FileOptions{Direct: blockdev.DirectOff}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			o.Size, o.Sparse = 4<<20, true
			f := openFile(t, filepath.Join(c.dir(t), "dev"), &o)
			buf := make([]byte, 3*4096+1)
			data := buf[1:] // not 4 KiB aligned: O_DIRECT goes through the bounce buffers
			for i := range data {
				data[i] = byte(i*7 + 3)
			}
			for _, off := range []int64{0, 1 << 20, 4<<20 - int64(len(data))} {
				if err := f.WriteAtFUA(ctx, data, off); err != nil {
					t.Fatalf("WriteAtFUA at %d: %v", off, err)
				}
				got := make([]byte, len(data))
				if err := f.ReadAt(ctx, got, off); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("read back at %d: %v, equal %v", off, err, bytes.Equal(got, data))
				}
				raw, err := os.ReadFile(f.Path())
				if err != nil || !bytes.Equal(raw[off:off+int64(len(data))], data) {
					t.Fatalf("the file itself at %d: %v", off, err)
				}
			}
			if err := f.WriteAtFUA(ctx, data, 4<<20); err == nil {
				t.Fatal("a FUA write past the end went through")
			}
		})
	}
}
