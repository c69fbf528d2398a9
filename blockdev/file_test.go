package blockdev_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
)

func openFile(t *testing.T, path string, o *blockdev.FileOptions) *blockdev.File {
	t.Helper()
	f, err := blockdev.OpenFile(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func newFileDevice(dir func(t *testing.T) string, direct blockdev.DirectMode) devtest.NewDevice {
	return func(t *testing.T, size int64) blockdev.Device {
		return openFile(t, filepath.Join(dir(t), "dev"), &blockdev.FileOptions{Size: size, Direct: direct})
	}
}

func TestConformanceFileBuffered(t *testing.T) {
	devtest.Run(t, newFileDevice(func(t *testing.T) string { return t.TempDir() }, blockdev.DirectOff))
}

// directDir returns a temporary directory on a file system that takes
// O_DIRECT, trying the default temporary directory and then /var/tmp.
func directDir(t *testing.T) string {
	t.Helper()
	var reasons []string
	for _, parent := range []string{"", "/var/tmp"} {
		dir, err := os.MkdirTemp(parent, "blockdev-direct-")
		if err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		f, err := blockdev.OpenFile(filepath.Join(dir, "probe"), &blockdev.FileOptions{Size: 1 << 20, Direct: blockdev.DirectRequired})
		if err == nil {
			f.Close()
			return dir
		}
		reasons = append(reasons, err.Error())
	}
	if runtime.GOOS == "linux" {
		t.Fatalf("no temporary directory takes O_DIRECT: %s", strings.Join(reasons, "; "))
	}
	t.Skipf("O_DIRECT is Linux only here (%s)", runtime.GOOS)
	return ""
}

func TestConformanceFileDirect(t *testing.T) {
	devtest.Run(t, newFileDevice(directDir, blockdev.DirectRequired))
}

func TestFileDirectUnalignedBuffers(t *testing.T) {
	f := openFile(t, filepath.Join(directDir(t), "dev"), &blockdev.FileOptions{Size: 4 << 20, Direct: blockdev.DirectRequired})
	if !f.Direct() || f.DirectReason() != "" {
		t.Fatalf("Direct() = %v, reason %q", f.Direct(), f.DirectReason())
	}
	ctx := context.Background()
	// 3 MiB + 8 KiB from an odd address: the bounce path in several pieces.
	n := 3<<20 + 8192
	src := make([]byte, n+1)[1:]
	for i := range src {
		src[i] = byte(i*7 + i>>12)
	}
	if err := f.WriteAt(ctx, src, 4096); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, n+3)[3:]
	if err := f.ReadAt(ctx, dst, 4096); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, dst) {
		t.Fatal("unaligned O_DIRECT round trip differs")
	}
}

func TestOpenFileErrors(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing")
	if err := os.WriteFile(existing, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	odd := filepath.Join(dir, "odd")
	if err := os.WriteFile(odd, make([]byte, 5000), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, c := range []struct {
		name string
		path string
		o    blockdev.FileOptions
		want error
	}{
		{"missing without size", missing, blockdev.FileOptions{}, fs.ErrNotExist},
		{"missing with NoCreate", missing, blockdev.FileOptions{Size: 1 << 20, NoCreate: true}, fs.ErrNotExist},
		{"smaller without Grow", existing, blockdev.FileOptions{Size: 2 << 20}, blockdev.ErrInvalid},
		{"never shrink", existing, blockdev.FileOptions{Size: 4096, Grow: true}, blockdev.ErrInvalid},
		{"size not a block multiple", existing, blockdev.FileOptions{Size: 4097}, blockdev.ErrInvalid},
		{"bad block size", existing, blockdev.FileOptions{BlockSize: 1000}, blockdev.ErrInvalid},
		{"bad direct mode", existing, blockdev.FileOptions{Direct: 9}, blockdev.ErrInvalid},
		{"file not a block multiple", odd, blockdev.FileOptions{}, blockdev.ErrInvalid},
		{"directory", dir, blockdev.FileOptions{}, blockdev.ErrInvalid},
		{"character device", "/dev/null", blockdev.FileOptions{}, blockdev.ErrInvalid},
	} {
		f, err := blockdev.OpenFile(c.path, &c.o)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if f != nil {
			f.Close()
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed open created %s", missing)
	}
}

func TestOpenFileReopenAndGrow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dev")
	ctx := context.Background()
	f, err := blockdev.OpenFile(path, &blockdev.FileOptions{Size: 1 << 20, Direct: blockdev.DirectOff})
	if err != nil {
		t.Fatal(err)
	}
	if f.Direct() || f.DirectReason() == "" {
		t.Errorf("DirectOff: Direct() = %v, reason %q", f.Direct(), f.DirectReason())
	}
	want := fill(8192, 0x3c)
	if err := f.WriteAt(ctx, want, 1<<20-8192); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g := openFile(t, path, &blockdev.FileOptions{Size: 3 << 20, Grow: true})
	if g.Size() != 3<<20 {
		t.Fatalf("grown size %d", g.Size())
	}
	if got := readBack(t, g, 1<<20-8192, 8192); !bytes.Equal(got, want) {
		t.Fatal("data lost across reopen and grow")
	}
	if got := readBack(t, g, 1<<20, 2<<20); !bytes.Equal(got, make([]byte, 2<<20)) {
		t.Fatal("grown space does not read as zeros")
	}
	h := openFile(t, path, nil) // size from the file
	if h.Size() != 3<<20 || h.BlockSize() != 4096 {
		t.Fatalf("reopen with nil options: size %d, block size %d", h.Size(), h.BlockSize())
	}
}
