//go:build linux

package fuse

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
)

func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(testutil.Exec(t, name, args...))
}

// writeTree writes a tree of files with random content and returns their
// SHA-256 sums by relative path.
func writeTree(t *testing.T, root string) map[string][32]byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(42, 1))
	sums := map[string][32]byte{}
	for d := range 5 {
		for f := range 8 {
			rel := filepath.Join(fmt.Sprintf("dir%d", d), fmt.Sprintf("sub%d", f%3), fmt.Sprintf("file%d.bin", f))
			b := make([]byte, rng.IntN(3<<20)+1)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			p := filepath.Join(root, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			sums[rel] = sha256.Sum256(b)
		}
	}
	return sums
}

// The FUSE file as a disk: loop device (direct IO), mkfs.ext4, mount, a tree
// of files, sync, unmount everything, mount the FUSE file system again over
// the same device, loop and mount again, and every file checks out.
func TestLoopExt4(t *testing.T) {
	requireFUSE(t)
	for _, tool := range []string{"losetup", "mkfs.ext4", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
	m, err := blockdev.NewMem(256<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	fsA, dirA := mountNoCleanup(t, map[string]blockdev.Device{"vol": m})
	dir, loop, undo := testutil.LoopAttach(t, filepath.Join(dirA, "vol"))
	sh(t, "mkfs.ext4", "-q", "-F", "-E", "nodiscard", loop)
	sh(t, "mount", loop, dir)
	sums := writeTree(t, dir)
	sh(t, "sync", "-f", dir)
	sh(t, "umount", dir)
	undo()
	testutil.UnmountRetry(t, fsA)

	fsB, dirB := mountNoCleanup(t, map[string]blockdev.Device{"vol": m})
	dir, loop, undo = testutil.LoopAttach(t, filepath.Join(dirB, "vol"))
	sh(t, "mount", loop, dir)
	for rel, want := range sums {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if sha256.Sum256(b) != want {
			t.Fatalf("%s: checksum differs after remount", rel)
		}
	}
	sh(t, "umount", dir)
	sh(t, "fsck.ext4", "-n", "-f", loop)
	undo()
	testutil.UnmountRetry(t, fsB)
	if mounted(t, dirA) || mounted(t, dirB) {
		t.Fatal("a FUSE mount was left behind")
	}
}

// mountNoCleanup mounts with only a lazy unmount as the safety net: the test
// unmounts itself, in order, behind the loop device.
func mountNoCleanup(t *testing.T, files map[string]blockdev.Device) (*FS, string) {
	t.Helper()
	dir := t.TempDir()
	m, err := Mount(dir, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if mounted(t, dir) {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return m, dir
}

// TestLoopResize: a loop device over a FUSE file takes the grown size at
// losetup --set-capacity once Resized has told the kernel, and reads the
// device past its old end.
func TestLoopResize(t *testing.T) {
	requireFUSE(t)
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skipf("losetup not installed: %v", err)
	}
	const old, grown = 4 << 20, 8 << 20
	dev, data := growable(t, old, grown)
	fsys, dir := mountNoCleanup(t, map[string]blockdev.Device{"vol": dev})
	_, loop, undo := testutil.LoopAttach(t, filepath.Join(dir, "vol"))
	if got := sh(t, "blockdev", "--getsize64", loop); got != fmt.Sprint(old) {
		t.Fatalf("%s: %s bytes before the resize, want %d", loop, got, old)
	}
	dev.Resize(grown)
	if err := fsys.Resized("vol"); err != nil {
		t.Fatal(err)
	}
	sh(t, "losetup", "--set-capacity", loop)
	if got := sh(t, "blockdev", "--getsize64", loop); got != fmt.Sprint(grown) {
		t.Fatalf("%s: %s bytes after the resize, want %d", loop, got, grown)
	}
	f, err := os.OpenFile(loop, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := testutil.AlignedBuf(1 << 20)
	n, err := f.ReadAt(got, old-4096)
	f.Close()
	if n != len(got) || !bytes.Equal(got, data[old-4096:old-4096+len(got)]) {
		t.Fatalf("read of %s across the old end: %d bytes, %v", loop, n, err)
	}
	undo()
	testutil.UnmountRetry(t, fsys)
}
