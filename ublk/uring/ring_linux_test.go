package uring_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nvstripe/nvstripe/ublk/uring"
)

func newRing(t *testing.T, entries uint32, opts *uring.Options) *uring.Ring {
	t.Helper()
	r, err := uring.New(entries, opts)
	if errors.Is(err, uring.ErrUnsupported) {
		t.Skipf("io_uring not available here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func sqe(t *testing.T, r *uring.Ring) *uring.SQE {
	t.Helper()
	s, err := r.SQE()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// reap waits for n completions and returns them keyed by user data.
func reap(t *testing.T, r *uring.Ring, n int) map[uint64]uring.CQE {
	t.Helper()
	got := map[uint64]uring.CQE{}
	for range n {
		c, err := r.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := got[c.UserData]; dup {
			t.Fatalf("completion %d reaped twice", c.UserData)
		}
		got[c.UserData] = c
	}
	return got
}

func TestNop(t *testing.T) {
	r := newRing(t, 8, nil)
	for i := range uint64(8) {
		sqe(t, r).PrepNop(100 + i)
	}
	if n, err := r.SubmitAndWait(8); err != nil || n != 8 {
		t.Fatalf("SubmitAndWait = %d, %v; want 8 submitted", n, err)
	}
	got := reap(t, r, 8)
	for i := range uint64(8) {
		if c, ok := got[100+i]; !ok || c.Res != 0 {
			t.Fatalf("NOP %d: %+v (present %v), want res 0", 100+i, c, ok)
		}
	}
	if _, ok := r.Peek(); ok {
		t.Fatal("a completion left over after 8 NOPs")
	}
}

func TestFileReadWrite(t *testing.T) {
	r := newRing(t, 4, nil)
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := bytes.Repeat([]byte("uring!"), 700)
	sqe(t, r).PrepWrite(int(f.Fd()), addr(want), uint32(len(want)), 4096, 1)
	if c := reap(t, r, 1)[1]; c.Res != int32(len(want)) {
		t.Fatalf("write res %d, want %d", c.Res, len(want))
	}
	onDisk, err := os.ReadFile(f.Name())
	if err != nil || !bytes.Equal(onDisk[4096:], want) || len(onDisk) != 4096+len(want) {
		t.Fatalf("file after io_uring write: %d bytes, err %v", len(onDisk), err)
	}
	got := make([]byte, len(want)+10)
	sqe(t, r).PrepRead(int(f.Fd()), addr(got), uint32(len(got)), 4096, 2)
	if c := reap(t, r, 1)[2]; c.Res != int32(len(want)) || !bytes.Equal(got[:len(want)], want) {
		t.Fatalf("read res %d (want %d, short read at EOF), data equal %v", c.Res, len(want), bytes.Equal(got[:len(want)], want))
	}
	runtime.KeepAlive(want)
	runtime.KeepAlive(got)
}

func pipe(t *testing.T) (rd, wr int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p[0], p[1]
}

// TestPipe: a read on an empty pipe stays in flight until a write through
// the same ring feeds it.
func TestPipe(t *testing.T) {
	r := newRing(t, 4, nil)
	rd, wr := pipe(t)
	buf := make([]byte, 64)
	sqe(t, r).PrepRead(rd, addr(buf), uint32(len(buf)), -1, 1)
	if n, err := r.Submit(); err != nil || n != 1 {
		t.Fatalf("Submit = %d, %v", n, err)
	}
	if c, ok := r.Peek(); ok {
		t.Fatalf("read of an empty pipe completed: %+v", c)
	}
	msg := []byte("through the pipe")
	sqe(t, r).PrepWrite(wr, addr(msg), uint32(len(msg)), -1, 2)
	got := reap(t, r, 2)
	if got[2].Res != int32(len(msg)) || got[1].Res != int32(len(msg)) || !bytes.Equal(buf[:len(msg)], msg) {
		t.Fatalf("write %+v read %+v data %q", got[2], got[1], buf[:max(0, got[1].Res)])
	}
	runtime.KeepAlive(msg)
	runtime.KeepAlive(buf)
}

// TestFullSQ: SQE refuses a slot once every slot holds an unsubmitted entry,
// and hands out slots again after Submit.
func TestFullSQ(t *testing.T) {
	r := newRing(t, 4, nil)
	for i := range uint64(r.SQEntries()) {
		sqe(t, r).PrepNop(i)
	}
	if _, err := r.SQE(); !errors.Is(err, uring.ErrSQFull) {
		t.Fatalf("SQE on a full ring: %v, want ErrSQFull", err)
	}
	if n, err := r.Submit(); err != nil || n != int(r.SQEntries()) {
		t.Fatalf("Submit = %d, %v; want %d", n, err, r.SQEntries())
	}
	sqe(t, r).PrepNop(99)
	got := reap(t, r, int(r.SQEntries())+1)
	if _, ok := got[99]; !ok {
		t.Fatal("NOP submitted after the full ring drained did not complete")
	}
}

// TestCQOverflow submits three times the CQ size... more completions than
// the CQ holds without reaping: with FeatNoDrop none may be lost; without it
// the overflow counter must count the dropped ones.
func TestCQOverflow(t *testing.T) {
	r := newRing(t, 4, &uring.Options{CQEntries: 8})
	const rounds = 3
	total := rounds * int(r.SQEntries())
	for round := range rounds {
		for i := range int(r.SQEntries()) {
			sqe(t, r).PrepNop(uint64(round*int(r.SQEntries()) + i))
		}
		if _, err := r.Submit(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	extra := total - int(r.CQEntries())
	if r.Features()&uring.FeatNoDrop == 0 {
		if got := r.Overflow(); got != uint32(extra) {
			t.Fatalf("no NODROP: overflow counter %d, want %d", got, extra)
		}
		return
	}
	if !r.Overflowed() {
		t.Fatalf("%d completions in a CQ of %d, but IORING_SQ_CQ_OVERFLOW is not set", total, r.CQEntries())
	}
	got := reap(t, r, total)
	if len(got) != total || r.Overflow() != 0 || r.Overflowed() {
		t.Fatalf("reaped %d of %d, overflow counter %d, flag %v", len(got), total, r.Overflow(), r.Overflowed())
	}
}

// TestCloseInFlight closes a ring with a read pending on an empty pipe: Close
// returns, and every later call says ErrClosed instead of touching the
// unmapped rings.
func TestCloseInFlight(t *testing.T) {
	r, err := uring.New(4, nil)
	if err != nil {
		t.Skipf("io_uring not available here: %v", err)
	}
	rd, wr := pipe(t)
	buf := make([]byte, 8)
	s, _ := r.SQE()
	s.PrepRead(rd, addr(buf), 8, -1, 1)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close with a read in flight: %v", err)
	}
	if _, err := r.SQE(); !errors.Is(err, uring.ErrClosed) {
		t.Fatalf("SQE after Close: %v", err)
	}
	if _, err := r.Wait(); !errors.Is(err, uring.ErrClosed) {
		t.Fatalf("Wait after Close: %v", err)
	}
	if _, ok := r.Peek(); ok {
		t.Fatal("Peek after Close returned a completion")
	}
	// The cancelled read must not consume what is written now.
	if _, err := unix.Write(wr, []byte("later")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8)
	if n, err := unix.Read(rd, got); err != nil || string(got[:n]) != "later" {
		t.Fatalf("pipe after Close: %q, %v (the cancelled read took the data?)", got[:max(n, 0)], err)
	}
	runtime.KeepAlive(buf)
}

// TestURingCmd: the payload fits the command area of the SQE size, and the
// command reaches the kernel (a regular file has no uring_cmd handler).
func TestURingCmd(t *testing.T) {
	small := newRing(t, 2, nil)
	if err := small.PrepCmd(sqe(t, small), 0, 1, make([]byte, 17), 1); !errors.Is(err, uring.ErrCmdTooLarge) {
		t.Fatalf("17-byte payload in a 64-byte SQE: %v, want ErrCmdTooLarge", err)
	}
	r := newRing(t, 2, &uring.Options{Flags: uring.SetupSQE128})
	if r.CmdSize() != 80 {
		t.Fatalf("SQE128 command area %d bytes, want 80", r.CmdSize())
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := r.PrepCmd(sqe(t, r), int(f.Fd()), 0x1234, bytes.Repeat([]byte{7}, 80), 5); err != nil {
		t.Fatal(err)
	}
	c := reap(t, r, 1)[5]
	if c.Res != -int32(unix.EOPNOTSUPP) && c.Res != -int32(unix.ENOTTY) && c.Res != -int32(unix.EINVAL) {
		t.Fatalf("URING_CMD on a regular file: res %d, want -EOPNOTSUPP", c.Res)
	}
}
