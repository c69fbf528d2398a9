package ublk

// Tests against the kernel's ublk driver. They need /dev/ublk-control (the
// development host and CI have none): test/vmtest/scenarios/ublk-*.sh run them
// in the QEMU guest with ublk_drv loaded.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nbd"
)

func needDriver(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("no ublk driver here (%v): run through vmtest (go test ./test/vmtest) to test against the kernel", err)
	}
}

func checkGone(t *testing.T, id int) {
	t.Helper()
	for _, p := range []string{fmt.Sprintf("/dev/ublkb%d", id), fmt.Sprintf("/dev/ublkc%d", id)} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after the server stopped (stat: %v)", p, err)
		}
	}
}

// TestKernelIO serves a device and drives it through /dev/ublkbN with
// O_DIRECT: data written reaches the Device, reads come back, a device
// error becomes EIO, fsync reaches Flush, BLKDISCARD reaches Trim; then the
// device is stopped and deleted. Once with IO on the queue threads (Mem is
// synchronous) and once on goroutines (faultdev is not).
func TestKernelIO(t *testing.T) {
	needDriver(t)
	for _, inline := range []bool{true, false} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) { kernelIO(t, inline) })
	}
}

func kernelIO(t *testing.T, inline bool) {
	mem, _ := blockdev.NewMem(32<<20, 4096)
	fd := faultdev.New(mem, 1)
	var dev blockdev.Device = fd
	if inline {
		dev = mem
	}
	s, err := Start(context.Background(), dev, &Options{Depth: 16, MaxIO: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: encoding %s, info %+v", s.Path(), s.Encoding(), s.Info())
	f, err := os.OpenFile(s.Path(), os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	var size uint64
	if err := ioctlU64(f, unix.BLKGETSIZE64, &size); err != nil || size != 32<<20 {
		t.Errorf("BLKGETSIZE64 = %d, %v; want %d", size, err, 32<<20)
	}
	want := testutil.AlignedBuf(256 << 10) // larger than MaxIO: the kernel splits it
	for i := range want {
		want[i] = byte(i*7 + i>>12)
	}
	if _, err := f.WriteAt(want, 1<<20); err != nil {
		t.Fatalf("write: %v", err)
	}
	got := make([]byte, len(want))
	if err := mem.ReadAt(context.Background(), got, 1<<20); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("device content after a write through %s differs (err %v)", s.Path(), err)
	}
	back := testutil.AlignedBuf(len(want))
	if _, err := f.ReadAt(back, 1<<20); err != nil || !bytes.Equal(back, want) {
		t.Fatalf("read back through %s: err %v, equal %v", s.Path(), err, bytes.Equal(back, want))
	}
	if err := f.Sync(); err != nil {
		t.Errorf("fsync: %v", err)
	}
	rng := [2]uint64{1 << 20, 64 << 10}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKDISCARD, uintptr(unsafePtr(&rng))); errno != 0 {
		t.Errorf("BLKDISCARD: %v", errno)
	} else if mem.ReadAt(context.Background(), got[:64<<10], 1<<20); !bytes.Equal(got[:64<<10], make([]byte, 64<<10)) {
		t.Errorf("discarded range does not read as zeros on the device")
	}
	if !inline {
		st := fd.Stats()
		if st.Flushes == 0 || st.Trims == 0 {
			t.Errorf("device saw %+v: want a flush (fsync) and a trim (BLKDISCARD)", st)
		}
		fd.Add(faultdev.Rule{Ops: faultdev.OpRead, Off: 4 << 20, Len: 4096})
		if _, err := f.ReadAt(back[:4096], 4<<20); !errors.Is(err, syscall.EIO) {
			t.Errorf("read of a failing range: %v, want EIO", err)
		}
	}
	f.Close()
	if err := Delete(s.ID()); err == nil {
		t.Errorf("Delete of a device this live process serves succeeded")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	checkGone(t, s.ID())
}

// TestKernelReadOnly: Options.ReadOnly makes a read-only block device
// (BLKROGET says so and a write fails) whose reads still work.
func TestKernelReadOnly(t *testing.T) {
	needDriver(t)
	mem, _ := blockdev.NewMem(8<<20, 4096)
	want := bytes.Repeat([]byte{0x5a}, 4096)
	mem.WriteAt(context.Background(), want, 0)
	s, err := Start(context.Background(), mem, &Options{ReadOnly: true, Depth: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	f, err := os.OpenFile(s.Path(), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ro, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKROGET)
	if err != nil || ro != 1 {
		t.Errorf("BLKROGET = %d, %v; want 1", ro, err)
	}
	got := testutil.AlignedBuf(4096)
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Errorf("read of the read-only device: %v, equal %v", err, bytes.Equal(got, want))
	}
	if w, err := os.OpenFile(s.Path(), os.O_WRONLY, 0); err == nil {
		_, werr := w.WriteAt(want, 0)
		serr := w.Sync()
		w.Close()
		if werr == nil && serr == nil {
			t.Error("a write to the read-only device succeeded")
		}
	}
}

// TestKernelServe is the server of the test/vmtest/scenarios/ublk-*.sh scripts:
// with UBLK_VM_SERVE=FILE it serves a device and writes its /dev/ublkbN path
// to FILE, and on SIGTERM stops, checks that the device nodes are gone and
// that the device holds an ext4 superblock (the scenarios make one).
// The device: a Mem of UBLK_VM_SIZE_MB (default 256) MiB, or the file
// UBLK_VM_FILE of that size; UBLK_VM_ASYNC=1 runs its IO on goroutines.
// UBLK_VM_RECOVERY=1 adds it with Options.Recovery; UBLK_VM_RECOVER=ID
// takes device ID back from a killed server instead of adding one.
func TestKernelServe(t *testing.T) {
	ready := os.Getenv("UBLK_VM_SERVE")
	if ready == "" {
		t.Skip("UBLK_VM_SERVE not set: this is the server of a VM scenario")
	}
	needDriver(t)
	dev := vmDevice(t)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if addr := os.Getenv("UBLK_VM_NBD"); addr != "" {
		serveNBD(ctx, t, dev, addr, ready)
		return
	}
	var s *Server
	var err error
	if id, rerr := strconv.Atoi(os.Getenv("UBLK_VM_RECOVER")); rerr == nil {
		s, err = Recover(ctx, id, dev, nil)
	} else {
		s, err = Start(ctx, dev, &Options{Recovery: os.Getenv("UBLK_VM_RECOVERY") == "1"})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("serving %s: encoding %s, info %+v", s.Path(), s.Encoding(), s.Info())
	if err := os.WriteFile(ready, []byte(s.Path()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
	checkGone(t, s.ID())
	sb := make([]byte, 4096)
	if err := dev.ReadAt(context.Background(), sb, 0); err != nil || le.Uint16(sb[1024+56:]) != 0xef53 {
		t.Errorf("no ext4 superblock magic on the device after the scenario (err %v)", err)
	}
}

// serveNBD serves dev over NBD on addr instead (export "vm"), for the
// comparison in test/vmtest/scenarios/figures-ublk-nbd.sh.
func serveNBD(ctx context.Context, t *testing.T, dev blockdev.Device, addr, ready string) {
	srv, err := nbd.NewServer(nbd.Options{Exports: map[string]nbd.Export{"vm": {Device: dev}}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ready, []byte("nbd://"+addr+"/vm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(ctx, l); err != nil && !errors.Is(err, nbd.ErrServerClosed) && ctx.Err() == nil {
		t.Errorf("NBD Serve: %v", err)
	}
}

func vmDevice(t *testing.T) blockdev.Device {
	sizeMB, _ := strconv.Atoi(os.Getenv("UBLK_VM_SIZE_MB"))
	size := int64(max(sizeMB, 16)) << 20
	var dev blockdev.Device
	var err error
	if path := os.Getenv("UBLK_VM_FILE"); path != "" {
		dev, err = blockdev.OpenFile(path, &blockdev.FileOptions{Size: size, Direct: blockdev.DirectOff})
	} else {
		dev, err = blockdev.NewMem(size, 4096)
	}
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("UBLK_VM_ASYNC") == "1" {
		dev = faultdev.New(dev, 1) // not Synchronous: IO runs on goroutines
	}
	return dev
}

// TestKernelDelete deletes device UBLK_VM_DELETE, left by a killed server.
func TestKernelDelete(t *testing.T) {
	id, err := strconv.Atoi(os.Getenv("UBLK_VM_DELETE"))
	if err != nil {
		t.Skip("UBLK_VM_DELETE not set: this deletes a device left by a VM scenario")
	}
	needDriver(t)
	if err := Delete(id); err != nil {
		t.Fatal(err)
	}
	checkGone(t, id)
}
