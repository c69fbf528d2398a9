package blockdev_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
)

func TestOpenFileCreate(t *testing.T) {
	dir := t.TempDir()
	thick := openFile(t, filepath.Join(dir, "thick"), &blockdev.FileOptions{Size: 8 << 20})
	sparse := openFile(t, filepath.Join(dir, "sparse"), &blockdev.FileOptions{Size: 8 << 20, Sparse: true})
	for _, c := range []struct {
		f    *blockdev.File
		want func(blocks int64) bool
		what string
	}{
		{thick, func(b int64) bool { return b*512 >= 8<<20 }, "preallocated"},
		{sparse, func(b int64) bool { return b == 0 }, "sparse"},
	} {
		st, err := os.Stat(c.f.Path())
		if err != nil {
			t.Fatal(err)
		}
		blocks := st.Sys().(*syscall.Stat_t).Blocks
		if st.Size() != 8<<20 || c.f.Size() != 8<<20 || !c.want(blocks) {
			t.Errorf("%s file: size %d, device size %d, %d blocks of 512", c.what, st.Size(), c.f.Size(), blocks)
		}
	}
}

// TestConformanceLoopDevice runs the suite on a loop block device over a
// temporary file, for the block device paths (BLKGETSIZE64, zero-out).
func TestConformanceLoopDevice(t *testing.T) {
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("losetup not installed (util-linux)")
	}
	if os.Geteuid() != 0 {
		t.Skip("attaching a loop device needs root")
	}
	devtest.Run(t, func(t *testing.T, size int64) blockdev.Device {
		backing := filepath.Join(t.TempDir(), "backing")
		if err := os.WriteFile(backing, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(backing, size); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("losetup", "--find", "--show", backing).CombinedOutput()
		if err != nil {
			t.Skipf("losetup --find cannot attach a loop device here: %v: %s", err, out)
		}
		dev := strings.TrimSpace(string(out))
		t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
		f := openFile(t, dev, nil)
		if !f.IsBlockDevice() {
			t.Fatalf("%s not seen as a block device", dev)
		}
		return f
	})
}

func TestFileAllocatedSparse(t *testing.T) {
	ctx := context.Background()
	f := openFile(t, filepath.Join(t.TempDir(), "dev"), &blockdev.FileOptions{Size: 8 << 20, Sparse: true})
	if err := f.WriteAt(ctx, fill(8192, 1), 3<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ext, err := f.Allocated(ctx, 0, f.Size())
	if err != nil {
		t.Fatal(err)
	}
	if len(ext) != 1 || ext[0].Off > 3<<20 || ext[0].Off+ext[0].Len < 3<<20+8192 || ext[0].Len > 1<<20 {
		t.Fatalf("Allocated = %v, want one small extent around [3 MiB, 3 MiB + 8 KiB)", ext)
	}
	if err := f.Trim(ctx, 2<<20, 2<<20); err != nil {
		t.Fatal(err)
	}
	if ext, err := f.Allocated(ctx, 0, f.Size()); err != nil || len(ext) != 0 {
		t.Fatalf("after Trim: Allocated = %v, %v; want nothing", ext, err)
	}
}

// TestFileNoSpace: a sparse File on a small tmpfs that fills up fails the
// write that needs a new block with ErrNoSpace (not ErrUnavailable: the
// file is fine), keeps serving what it holds, and takes writes again once
// space is freed.
func TestFileNoSpace(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("mounting a small tmpfs needs root (CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	f := openFile(t, filepath.Join(dir, "thin"), &blockdev.FileOptions{Size: 1 << 20, Sparse: true})
	defer f.Close()
	ctx := context.Background()
	blk := make([]byte, 4096)
	var full int64 = -1
	for off := int64(0); off < f.Size(); off += 4096 {
		blk[0] = byte(off / 4096)
		err := f.WriteAt(ctx, blk, off)
		if err == nil {
			continue
		}
		if !errors.Is(err, blockdev.ErrNoSpace) || errors.Is(err, blockdev.ErrUnavailable) {
			t.Fatalf("write at %d on a full tmpfs: %v (class %v), want ErrNoSpace", off, err, blockdev.Class(err))
		}
		full = off
		break
	}
	if full <= 0 {
		t.Fatalf("a 1 MiB sparse file on a 256 KiB tmpfs never filled it (first failure at %d)", full)
	}
	for off := int64(0); off < full; off += 4096 {
		if err := f.ReadAt(ctx, blk, off); err != nil || blk[0] != byte(off/4096) {
			t.Fatalf("read at %d after the file system filled: %v, first byte %d", off, err, blk[0])
		}
	}
	if err := f.WriteAt(ctx, blk, 0); err != nil {
		t.Fatalf("overwriting an allocated block of a full file system: %v", err)
	}
	// Zeroing needs no space: where it cannot zero in place, it punches.
	if err := f.WriteZeroes(ctx, full, 64<<10); err != nil {
		t.Fatalf("write-zeroes on a full file system: %v", err)
	}
	if err := f.ReadAt(ctx, blk, full); err != nil || !bytes.Equal(blk, make([]byte, 4096)) {
		t.Fatalf("read after write-zeroes: %v, zeros %t", err, bytes.Equal(blk, make([]byte, 4096)))
	}
	if err := f.Trim(ctx, 0, 64<<10); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteAt(ctx, blk, full); err != nil {
		t.Fatalf("write at %d after space was freed: %v", full, err)
	}
}
