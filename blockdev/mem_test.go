package blockdev_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
)

func fill(n int, v byte) []byte { return bytes.Repeat([]byte{v}, n) }

func mustMem(t *testing.T, crashable bool, size int64) *blockdev.Mem {
	t.Helper()
	newMem := blockdev.NewMem
	if crashable {
		newMem = blockdev.NewCrashableMem
	}
	m, err := newMem(size, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func readBack(t *testing.T, d blockdev.Device, off int64, n int) []byte {
	t.Helper()
	p := make([]byte, n)
	if err := d.ReadAt(context.Background(), p, off); err != nil {
		t.Fatalf("ReadAt(%d, %d): %v", off, n, err)
	}
	return p
}

func TestNewMemInvalid(t *testing.T) {
	for _, c := range []struct {
		size int64
		bs   int
	}{{4096, 0}, {4096, 256}, {4096, 8192}, {4096, 1000}, {-4096, 4096}, {4097, 4096}, {1024, 4096}} {
		if _, err := blockdev.NewMem(c.size, c.bs); !errors.Is(err, blockdev.ErrInvalid) {
			t.Errorf("NewMem(%d, %d) = %v, want ErrInvalid", c.size, c.bs, err)
		}
	}
}

func TestMemSparse(t *testing.T) {
	ctx := context.Background()
	m := mustMem(t, false, 64<<30) // 64 GiB: must cost nothing until written
	defer m.Close()
	if ext, _ := m.Allocated(ctx, 0, m.Size()); len(ext) != 0 {
		t.Fatalf("fresh Mem allocated %v", ext)
	}
	off := int64(40<<30 + 3<<20 + 8192)
	if err := m.WriteAt(ctx, fill(8192, 7), off); err != nil {
		t.Fatal(err)
	}
	ext, err := m.Allocated(ctx, 0, m.Size())
	want := []blockdev.Extent{{Off: off &^ (1<<20 - 1), Len: 1 << 20}}
	if err != nil || len(ext) != 1 || ext[0] != want[0] {
		t.Fatalf("Allocated = %v, %v; want %v", ext, err, want)
	}
	if err := m.Trim(ctx, off&^(1<<20-1), 1<<20); err != nil {
		t.Fatal(err)
	}
	if ext, _ := m.Allocated(ctx, 0, m.Size()); len(ext) != 0 {
		t.Fatalf("after whole-page trim allocated %v", ext)
	}
}

func TestMemSetUnavailable(t *testing.T) {
	ctx := context.Background()
	m := mustMem(t, false, 1<<20)
	if err := m.WriteAt(ctx, fill(4096, 1), 0); err != nil {
		t.Fatal(err)
	}
	m.SetUnavailable(true)
	if err := m.ReadAt(ctx, make([]byte, 4096), 0); !errors.Is(err, blockdev.ErrUnavailable) {
		t.Fatalf("read while unavailable: %v", err)
	}
	if err := m.Flush(ctx); !errors.Is(err, blockdev.ErrUnavailable) {
		t.Fatalf("flush while unavailable: %v", err)
	}
	m.SetUnavailable(false)
	if got := readBack(t, m, 0, 4096); !bytes.Equal(got, fill(4096, 1)) {
		t.Fatal("contents lost across unavailability")
	}
}

func TestMemCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := mustMem(t, false, 1<<20)
	if err := m.WriteAt(ctx, fill(4096, 1), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("write with canceled ctx: %v", err)
	}
	if got := readBack(t, m, 0, 4096); !bytes.Equal(got, make([]byte, 4096)) {
		t.Fatal("write with canceled ctx changed data")
	}
}

func TestMemCrashClone(t *testing.T) {
	ctx := context.Background()
	m := mustMem(t, true, 4<<20)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.WriteAt(ctx, fill(8192, 1), 0))
	must(m.WriteAt(ctx, fill(4096, 2), 1<<20))
	must(m.Flush(ctx))
	must(m.WriteAt(ctx, fill(4096, 3), 0))        // unflushed overwrite
	must(m.WriteAt(ctx, fill(4096, 4), 2<<20))    // unflushed new
	must(m.Trim(ctx, 1<<20, 4096))                // unflushed trim
	must(m.WriteAtFUA(ctx, fill(4096, 5), 3<<20)) // durable without flush
	must(m.WriteAtFUA(ctx, fill(4096, 6), 4096))  // durable overwrite
	c := m.CrashClone()
	if !c.Crashable() {
		t.Fatal("clone of a crashable Mem is not crashable")
	}
	for _, w := range []struct {
		off int64
		v   byte
	}{{0, 1}, {4096, 6}, {1 << 20, 2}, {2 << 20, 0}, {3 << 20, 5}} {
		if got := readBack(t, c, w.off, 4096); !bytes.Equal(got, fill(4096, w.v)) {
			t.Errorf("clone at %d = %d..., want %d", w.off, got[0], w.v)
		}
	}
	// The original still reads its current contents.
	if got := readBack(t, m, 0, 4096); got[0] != 3 {
		t.Errorf("original at 0 = %d, want 3", got[0])
	}
	// After a flush everything survives.
	must(m.Flush(ctx))
	c = m.CrashClone()
	for _, w := range []struct {
		off int64
		v   byte
	}{{0, 3}, {4096, 6}, {1 << 20, 0}, {2 << 20, 4}, {3 << 20, 5}} {
		if got := readBack(t, c, w.off, 4096); !bytes.Equal(got, fill(4096, w.v)) {
			t.Errorf("clone after flush at %d = %d..., want %d", w.off, got[0], w.v)
		}
	}
}

func TestMemCrashCloneRand(t *testing.T) {
	ctx := context.Background()
	m := mustMem(t, true, 1<<20)
	if err := m.WriteAt(ctx, fill(1<<20, 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Two unflushed generations of every block, and an FUA block in between.
	if err := m.WriteAt(ctx, fill(1<<20, 2), 0); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteAtFUA(ctx, fill(4096, 9), 0); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteAt(ctx, fill(1<<20-4096, 3), 4096); err != nil {
		t.Fatal(err)
	}
	c := m.CrashCloneRand(rand.New(rand.NewSource(1)))
	got := readBack(t, c, 0, 1<<20)
	if got[0] != 9 {
		t.Errorf("FUA block = %d, want 9", got[0])
	}
	seen := map[byte]int{}
	for b := 4096; b < len(got); b += 4096 {
		blk := got[b : b+4096]
		if !bytes.Equal(blk, fill(4096, blk[0])) || blk[0] < 1 || blk[0] > 3 {
			t.Fatalf("block %d is not one whole generation: %d", b/4096, blk[0])
		}
		seen[blk[0]]++
	}
	if len(seen) != 3 {
		t.Errorf("random crash kept generations %v, want a mix of 1, 2 and 3", seen)
	}
}
