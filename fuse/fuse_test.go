//go:build linux

package fuse

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
	"github.com/nvstripe/nvstripe/internal/testutil"
)

// requireFUSE skips t unless it runs as root with a usable /dev/fuse.
var requireFUSE = testutil.NeedFUSE

// mount mounts files under a temp dir; cleanup unmounts (lazily if it must)
// and checks no mount is left.
func mount(t *testing.T, files map[string]blockdev.Device, opts *Options) (*FS, string) {
	t.Helper()
	dir := t.TempDir()
	m, err := Mount(dir, files, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		if mounted(t, dir) {
			t.Errorf("%s still mounted", dir)
		}
	})
	return m, dir
}

// mounted reports whether dir is a mount point (in /proc/self/mountinfo).
var mounted = testutil.Mounted

func newMem(t *testing.T, size int64, bs int) *blockdev.Mem {
	t.Helper()
	m, err := blockdev.NewMem(size, bs)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// openRW opens path for reading and writing; the file is closed when t
// ends (before the unmount of a mount made earlier).
func openRW(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestFiles(t *testing.T) {
	requireFUSE(t)
	a, b := newMem(t, 8<<20, 4096), newMem(t, 1<<20, 512)
	_, dir := mount(t, map[string]blockdev.Device{"vol-a": a, "b": b}, nil)
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 2 || ents[0].Name() != "b" || ents[1].Name() != "vol-a" {
		t.Fatalf("readdir: %v %v", ents, err)
	}
	st, err := os.Stat(filepath.Join(dir, "vol-a"))
	if err != nil || st.Size() != 8<<20 || !st.Mode().IsRegular() {
		t.Fatalf("stat: %v %v", st, err)
	}
	f := openRW(t, filepath.Join(dir, "vol-a"))
	// Unaligned write: read-modify-write of the blocks around it.
	p := testutil.Pattern(10000, 1)
	if _, err := f.WriteAt(p, 4000); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16384)
	if err := a.ReadAt(t.Context(), got, 0); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 16384)
	copy(want[4000:], p)
	if !bytes.Equal(got, want) {
		t.Fatal("unaligned write landed wrong on the device")
	}
	q := make([]byte, 777)
	if _, err := f.ReadAt(q, 4100); err != nil || !bytes.Equal(q, p[100:877]) {
		t.Fatalf("unaligned read: %v", err)
	}
	// The size is fixed.
	if err := f.Truncate(4 << 20); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("truncate to another size: %v", err)
	}
	if err := f.Truncate(8 << 20); err != nil {
		t.Fatalf("truncate to the same size: %v", err)
	}
	if _, err := f.WriteAt([]byte{1}, 8<<20); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the end: %v", err)
	}
	if n, err := f.ReadAt(make([]byte, 100), 8<<20-50); n != 50 {
		t.Fatalf("read across the end: %d %v", n, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync: %v", err)
	}
}

// fallocate: PUNCH_HOLE trims (the Mem frees whole pages), ZERO_RANGE
// zeroes, both with partial blocks at the edges.
func TestFallocate(t *testing.T) {
	requireFUSE(t)
	const mib = 1 << 20
	m := newMem(t, 4*mib, 4096)
	if err := m.WriteAt(t.Context(), bytes.Repeat([]byte{0xee}, 4*mib), 0); err != nil {
		t.Fatal(err)
	}
	_, dir := mount(t, map[string]blockdev.Device{"v": m}, nil)
	f := openRW(t, filepath.Join(dir, "v"))
	const punch, zero, keep = 0x02, 0x10, 0x01
	if err := syscall.Fallocate(int(f.Fd()), punch|keep, mib-100, mib+200); err != nil {
		t.Fatalf("punch hole: %v", err)
	}
	if err := syscall.Fallocate(int(f.Fd()), zero, 3*mib+10, 5000); err != nil {
		t.Fatalf("zero range: %v", err)
	}
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, mib); err != nil {
		t.Fatalf("allocate: %v", err)
	}
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, 5*mib); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("allocate past the end: %v", err)
	}
	want := bytes.Repeat([]byte{0xee}, 4*mib)
	clear(want[mib-100 : 2*mib+100])
	clear(want[3*mib+10 : 3*mib+5010])
	got := make([]byte, 4*mib)
	if err := m.ReadAt(t.Context(), got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("fallocate result differs")
	}
	ext, err := m.Allocated(t.Context(), 0, 4*mib)
	if err != nil || len(ext) != 2 || ext[0] != (blockdev.Extent{Off: 0, Len: mib}) {
		t.Fatalf("the punched page was not released: %v %v", ext, err)
	}
}

// fsync reaches the device: on a crashable Mem a write survives a crash
// only after fsync.
func TestFsyncFlushes(t *testing.T) {
	requireFUSE(t)
	m, err := blockdev.NewCrashableMem(1<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	_, dir := mount(t, map[string]blockdev.Device{"v": m}, nil)
	f := openRW(t, filepath.Join(dir, "v"))
	p := testutil.Pattern(8192, 3)
	if _, err := f.WriteAt(p, 8192); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8192)
	m.CrashClone().ReadAt(t.Context(), got, 8192)
	if bytes.Equal(got, p) {
		t.Fatal("an unflushed write survived the crash: the test cannot see fsync")
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	m.CrashClone().ReadAt(t.Context(), got, 8192)
	if !bytes.Equal(got, p) {
		t.Fatal("fsync did not make the write durable")
	}
}

func TestReadOnly(t *testing.T) {
	requireFUSE(t)
	_, dir := mount(t, map[string]blockdev.Device{"v": newMem(t, 1<<20, 4096)}, &Options{ReadOnly: true})
	if _, err := os.OpenFile(filepath.Join(dir, "v"), os.O_RDWR, 0); !errors.Is(err, syscall.EROFS) && !errors.Is(err, syscall.EACCES) {
		t.Fatalf("read-write open of a read-only mount: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "v"))
	if err != nil || len(b) != 1<<20 {
		t.Fatalf("read: %d %v", len(b), err)
	}
}

// Many goroutines doing O_DIRECT IO of 4 KiB to 1 MiB at once, on disjoint
// ranges, then everything read back and compared.
func TestParallelDirectIO(t *testing.T) {
	requireFUSE(t)
	const size = 64 << 20
	m := newMem(t, size, 4096)
	_, dir := mount(t, map[string]blockdev.Device{"v": m}, nil)
	want := make([]byte, size)
	var wg sync.WaitGroup
	const workers = 8
	for w := range workers {
		wg.Go(func() {
			f, err := os.OpenFile(filepath.Join(dir, "v"), os.O_RDWR|syscall.O_DIRECT, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			region := int64(size / workers)
			for i := range 64 {
				n := int64(4096) << rng.IntN(9) // 4 KiB .. 1 MiB
				off := int64(w)*region + rng.Int64N((region-n)/4096)*4096
				buf := testutil.AlignedBuf(int(n))
				copy(buf, testutil.Pattern(int(n), byte(w*64+i)))
				if _, err := f.WriteAt(buf, off); err != nil {
					t.Error(err)
					return
				}
				copy(want[off:], buf) // regions are disjoint per worker
				chk := testutil.AlignedBuf(int(n))
				if _, err := f.ReadAt(chk, off); err != nil || !bytes.Equal(chk, buf) {
					t.Errorf("worker %d: read back at %d: %v", w, off, err)
					return
				}
			}
		})
	}
	wg.Wait()
	got := make([]byte, size)
	if err := m.ReadAt(t.Context(), got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("device content differs after parallel direct IO")
	}
}

func TestMountErrors(t *testing.T) {
	for _, files := range []map[string]blockdev.Device{
		nil,
		{"a/b": newMem(t, 4096, 4096)},
		{"..": newMem(t, 4096, 4096)},
		{"x": nil},
	} {
		if _, err := Mount(t.TempDir(), files, nil); !errors.Is(err, blockdev.ErrInvalid) {
			t.Errorf("Mount(%v): %v", files, err)
		}
	}
	if os.Geteuid() == 0 {
		if _, err := Mount("/nonexistent/dir", map[string]blockdev.Device{"v": newMem(t, 4096, 4096)}, nil); err == nil {
			t.Error("mount on a missing directory succeeded")
		}
	}
}

// st_blksize, the IO size cp and friends use, is the device's optimal IO
// size (a volume's full stripe) when it has one, else its block size (at
// least 4096).
func TestBlksize(t *testing.T) {
	requireFUSE(t)
	_, dir := mount(t, map[string]blockdev.Device{
		"striped": devtest.OptimalIO{Device: newMem(t, 8<<20, 4096), Optimal: 512 << 10},
		"plain":   newMem(t, 8<<20, 512),
	}, nil)
	for name, want := range map[string]int64{"striped": 512 << 10, "plain": 4096} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dir, name), &st); err != nil || st.Blksize != want {
			t.Errorf("%s: st_blksize %d (%v), want %d", name, st.Blksize, err, want)
		}
	}
}
