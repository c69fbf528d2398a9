package kernel

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
)

// TestConformanceFile runs the blockdev conformance suite on a file opened
// through OpenPath (O_DIRECT where the file system allows it).
func TestConformanceFile(t *testing.T) {
	devtest.Run(t, func(t *testing.T, size int64) blockdev.Device {
		path := filepath.Join(t.TempDir(), "ns.img")
		d, err := OpenPath(Options{FileOptions: &blockdev.FileOptions{Size: size, Sparse: true}}, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	})
}

// TestOpenThroughSysfs finds a namespace in a fake sysfs tree whose device
// node is a regular file, opens it with O_DIRECT required and does IO.
func TestOpenThroughSysfs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sysfs discovery is Linux only")
	}
	sys := t.TempDir()
	nsDir := filepath.Join(sys, "class/nvme/nvme3/nvme3n1")
	if err := os.MkdirAll(nsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(sys, "class/nvme/nvme3/subsysnqn"), []byte("nqn.x:y\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(nsDir, "nsid"), []byte("1\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(nsDir, "uuid"), []byte("00000000-0000-0000-0000-0000000000ab\n"), 0o644))
	dev := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dev, "nvme3n1"), make([]byte, 1<<20), 0o600))

	d, err := Open(Options{SysfsRoot: sys, DevRoot: dev}, "nqn.x:y", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Size() != 1<<20 || d.BlockSize() != 4096 {
		t.Fatalf("geometry %d/%d", d.Size(), d.BlockSize())
	}
	ctx := context.Background()
	p := bytes.Repeat([]byte{0xA5}, 8192)
	must(t, d.WriteAt(ctx, p, 4096))
	got := make([]byte, 8192)
	must(t, d.ReadAt(ctx, got, 4096))
	if !bytes.Equal(got, p) {
		t.Fatal("read back differs")
	}
	d2, err := OpenUUID(Options{SysfsRoot: sys, DevRoot: dev}, "000000000000000000000000000000AB")
	if err != nil {
		t.Fatal(err)
	}
	d2.Close()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
