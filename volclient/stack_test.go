package volclient

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/fuse"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nbd"
)

// stackVolume is a 4+2 volume of size bytes on six userspace NVMe/TCP targets.
func stackVolume(t *testing.T, size int64) (*testCluster, *Mapped) {
	t.Helper()
	tc := newTestCluster(t, 6, 96<<20, 4<<20)
	return tc, tc.openVolume(t, size, 128<<10, testOpenOptions("test"))
}

// run is testutil.Exec under this file's old name.
var run = testutil.Exec

func needTools(t *testing.T, tools ...string) {
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (CI installs libnbd-bin, qemu-utils, e2fsprogs, util-linux): %v", tool, err)
		}
	}
}

// TestNBDOverTargetsDegraded writes through NBD with nbdcopy and qemu-io into
// a volume on NVMe/TCP targets, stops one target half-way, writes more, and
// verifies everything read back through NBD.
func TestNBDOverTargetsDegraded(t *testing.T) {
	needTools(t, "nbdcopy", "qemu-io")
	const size = 64 << 20
	tc, m := stackVolume(t, size)
	srv, err := nbd.NewServer(nbd.Options{Exports: map[string]nbd.Export{"v": {Device: m.Volume}}})
	if err != nil {
		t.Fatal(err)
	}
	addr := testutil.ServeListener(t, srv.Serve)
	url := "nbd://" + addr + "/v"

	dir := t.TempDir()
	data := make([]byte, size)
	rand.Read(data)
	half := filepath.Join(dir, "half")
	os.WriteFile(half, data[:size/2], 0o644)
	run(t, "nbdcopy", "--connections=4", half, url)
	tc.targets[4].Close() // degraded from here on
	os.WriteFile(half, data[size/2:], 0o644)
	// nbdcopy writes from offset 0; the second half goes in with qemu-io.
	host, port, _ := net.SplitHostPort(addr)
	img := "driver=nbd,server.type=inet,server.host=" + host + ",server.port=" + port + ",export=v"
	run(t, "qemu-io", "--image-opts", "-c", fmt.Sprintf("write -s %s %d %d", half, size/2, size/2), img)
	// A pattern at an odd (512-aligned) offset, written and checked degraded.
	run(t, "qemu-io", "--image-opts", "-c", "write -P 0x5a 12800 7168", img)
	copy(data[12800:12800+7168], bytes.Repeat([]byte{0x5a}, 7168))
	run(t, "qemu-io", "--image-opts", "-c", "read -P 0x5a 12800 7168", img)

	back := filepath.Join(dir, "back")
	run(t, "nbdcopy", "--connections=4", url, back)
	got, err := os.ReadFile(back)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("data read back through NBD after a target stopped differs (err %v)", err)
	}
}

// TestFUSELoopExt4OverTargetsDegraded formats the volume, shown as a FUSE
// file and attached to a loop device, with ext4; writes a tree of files; stops
// a target; writes more; remounts everything and verifies checksums.
func TestFUSELoopExt4OverTargetsDegraded(t *testing.T) {
	testutil.NeedFUSE(t)
	needTools(t, "losetup", "mkfs.ext4")
	tc, m := stackVolume(t, 128<<20)
	fdir := t.TempDir()
	mountFS := func() *fuse.FS {
		fs, err := fuse.Mount(fdir, map[string]blockdev.Device{"v": m.Volume}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	fs := mountFS()
	file := filepath.Join(fdir, "v")
	run(t, "mkfs.ext4", "-q", "-F", "-E", "nodiscard", file)
	mnt, loop, undo := testutil.LoopAttach(t, file)
	run(t, "mount", "-t", "ext4", loop, mnt)
	sums := writeFiles(t, mnt, "a", 20)
	tc.targets[1].Close() // degraded from here on
	for k, v := range writeFiles(t, mnt, "b", 20) {
		sums[k] = v
	}
	run(t, "sync")
	undo()
	testutil.UnmountRetry(t, fs)
	fs = mountFS()
	defer testutil.UnmountRetry(t, fs)
	mnt, loop, undo = testutil.LoopAttach(t, file)
	run(t, "mount", "-t", "ext4", loop, mnt)
	defer undo()
	for name, want := range sums {
		b, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil || sha256.Sum256(b) != want {
			t.Fatalf("%s: differs after remount (err %v)", name, err)
		}
	}
}

// writeFiles writes n files of random sizes under dir/prefix and returns
// their checksums by relative path.
func writeFiles(t *testing.T, dir, prefix string, n int) map[string][32]byte {
	t.Helper()
	sums := map[string][32]byte{}
	os.MkdirAll(filepath.Join(dir, prefix, "sub"), 0o755)
	for i := 0; i < n; i++ {
		name := filepath.Join(prefix, fmt.Sprintf("f%02d", i))
		if i%2 == 1 {
			name = filepath.Join(prefix, "sub", fmt.Sprintf("f%02d", i))
		}
		b := make([]byte, 4096*(i+1)+i*37)
		rand.Read(b)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		sums[name] = sha256.Sum256(b)
	}
	return sums
}
