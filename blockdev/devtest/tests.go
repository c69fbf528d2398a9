package devtest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
)

func testGeometry(t *testing.T, newDevice NewDevice) {
	d := newDevice(t, DefaultSize)
	if d.Size() != DefaultSize {
		t.Errorf("Size() = %d, want %d", d.Size(), DefaultSize)
	}
	bs := d.BlockSize()
	if bs < 512 || bs > 4096 || bs&(bs-1) != 0 {
		t.Errorf("BlockSize() = %d, want a power of two from 512 to 4096", bs)
	}
	if d.Size()%int64(bs) != 0 {
		t.Errorf("Size() %d is not a multiple of BlockSize() %d", d.Size(), bs)
	}
	expect(t, d, 0, make([]byte, d.Size()), "fresh device reads zeros")
}

// fillDevice writes a pattern over the whole device and returns it.
func fillDevice(t *testing.T, d blockdev.Device, seed int64) []byte {
	t.Helper()
	img := pattern(seed, int(d.Size()))
	write(t, d, img, 0)
	return img
}

func testAlignment(t *testing.T, newDevice NewDevice) {
	d := newDevice(t, DefaultSize)
	img := fillDevice(t, d, 1)
	bs := int64(d.BlockSize())
	for _, c := range []struct{ off, n int64 }{
		{1, bs}, {bs / 2, bs}, {0, 1}, {0, bs + 1}, {bs, bs - 1}, {-bs, bs}, {bs + 3, 3 * bs},
	} {
		for name, op := range ops(d, c.off, c.n) {
			wantClass(t, op(), blockdev.ErrInvalid, name+" "+describe(c.off, c.n))
		}
	}
	ctx := context.Background()
	wantClass(t, d.Trim(ctx, 0, -bs), blockdev.ErrInvalid, "Trim negative length")
	wantClass(t, d.WriteZeroes(ctx, 0, -bs), blockdev.ErrInvalid, "WriteZeroes negative length")
	expect(t, d, 0, img, "after misaligned calls")
}

func testBounds(t *testing.T, newDevice NewDevice) {
	d := newDevice(t, DefaultSize)
	img := fillDevice(t, d, 2)
	bs, size := int64(d.BlockSize()), d.Size()
	for _, c := range []struct{ off, n int64 }{
		{size, bs}, {size - bs, 2 * bs}, {0, size + bs}, {size + bs, 0}, {size + 1<<20, bs}, {1 << 40, bs},
	} {
		for name, op := range ops(d, c.off, c.n) {
			wantClass(t, op(), blockdev.ErrOutOfRange, name+" "+describe(c.off, c.n))
		}
	}
	expect(t, d, 0, img, "after out-of-range calls")
	for name, op := range ops(d, size-bs, bs) {
		if err := op(); err != nil {
			t.Errorf("%s of the last block: %v", name, err)
		}
	}
}

func testZeroLength(t *testing.T, newDevice NewDevice) {
	d := newDevice(t, DefaultSize)
	img := fillDevice(t, d, 3)
	for _, off := range []int64{0, int64(d.BlockSize()), d.Size()} {
		for name, op := range ops(d, off, 0) {
			if err := op(); err != nil {
				t.Errorf("zero-length %s at %d: %v", name, off, err)
			}
		}
	}
	expect(t, d, 0, img, "after zero-length calls")
}

func testReadYourWrites(t *testing.T, newDevice NewDevice) {
	d := newDevice(t, DefaultSize)
	bs := d.BlockSize()
	model := make([]byte, d.Size())
	for i, c := range []struct {
		off int64
		n   int
	}{
		{0, bs}, {int64(bs), 3 * bs}, {1<<20 - int64(bs), 2 * bs}, {1 << 20, 1 << 20},
		{3<<20 - 2*int64(bs), 1<<20 + 2*bs}, {int64(5 * bs), bs}, {0, 2 << 20},
	} {
		p := pattern(int64(10+i), c.n)
		write(t, d, p, c.off)
		copy(model[c.off:], p)
		expect(t, d, c.off, p, "read of the range just written")
	}
	expect(t, d, 0, model, "whole device after overlapping writes")
	for off := int64(0); off < d.Size(); off += int64(bs) * 37 {
		expect(t, d, off, model[off:off+int64(bs)], "single-block read")
	}
}

// randomRange returns an aligned range of 0..maxBlocks blocks inside d.
func randomRange(r *rand.Rand, d blockdev.Device, maxBlocks int) (off, n int64) {
	bs := int64(d.BlockSize())
	blocks := d.Size() / bs
	nb := int64(r.Intn(maxBlocks + 1))
	if r.Intn(8) == 0 {
		nb = int64(r.Intn(int(min(blocks, 256))) + 1) // sometimes large
	}
	nb = min(nb, blocks)
	return r.Int63n(blocks-nb+1) * bs, nb * bs
}

func testRandomModel(t *testing.T, newDevice NewDevice) {
	d := newDevice(t, DefaultSize)
	ctx := context.Background()
	r := rand.New(rand.NewSource(4))
	model := make([]byte, d.Size())
	for step := 0; step < 400; step++ {
		off, n := randomRange(r, d, 64)
		switch k := r.Intn(10); {
		case k < 4:
			p := pattern(int64(step), int(n))
			write(t, d, p, off)
			copy(model[off:], p)
		case k < 8:
			expect(t, d, off, model[off:off+n], "random read")
		case k == 8:
			zero := d.Trim
			if r.Intn(2) == 0 {
				zero = d.WriteZeroes
			}
			if err := zero(ctx, off, n); err != nil {
				t.Fatalf("step %d: zero %s: %v", step, describe(off, n), err)
			}
			clear(model[off : off+n])
		default:
			if err := d.Flush(ctx); err != nil {
				t.Fatalf("step %d: Flush: %v", step, err)
			}
		}
	}
	expect(t, d, 0, model, "whole device after the random sequence")
}

func testParallelDisjoint(t *testing.T, newDevice NewDevice) {
	d := newDevice(t, DefaultSize)
	const workers = 8
	region := d.Size() / workers
	bs := int64(d.BlockSize())
	model := make([]byte, d.Size())
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() { errs <- worker(d, int64(w), model[int64(w)*region:][:region], bs) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	expect(t, d, 0, model, "whole device after parallel IO")
}

// worker writes, zeroes and checks random ranges of its own region, keeping
// the region's model up to date.
func worker(d blockdev.Device, w int64, model []byte, bs int64) error {
	ctx := context.Background()
	r := rand.New(rand.NewSource(w))
	base := w * int64(len(model))
	blocks := int64(len(model)) / bs
	for i := range 60 {
		nb := int64(r.Intn(16) + 1)
		off := r.Int63n(blocks-nb+1) * bs
		var err error
		switch i % 4 {
		case 0, 1:
			p := pattern(w*1000+int64(i), int(nb*bs))
			copy(model[off:], p)
			err = d.WriteAt(ctx, p, base+off)
		case 2:
			clear(model[off : off+nb*bs])
			err = d.Trim(ctx, base+off, nb*bs)
		default:
			p := make([]byte, nb*bs)
			if err = d.ReadAt(ctx, p, base+off); err == nil && !bytes.Equal(p, model[off:off+nb*bs]) {
				err = fmt.Errorf("worker %d: read %s differs from what it wrote", w, describe(base+off, nb*bs))
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func testTrim(t *testing.T, newDevice NewDevice) {
	testZeroing(t, newDevice, "Trim", func(d blockdev.Device) func(context.Context, int64, int64) error { return d.Trim })
}

func testWriteZeroes(t *testing.T, newDevice NewDevice) {
	testZeroing(t, newDevice, "WriteZeroes", func(d blockdev.Device) func(context.Context, int64, int64) error { return d.WriteZeroes })
}

// testZeroing zeroes ranges of every shape (one block, across a 1 MiB
// boundary, whole MiBs, the whole device) and checks that they and only they
// read as zeros afterwards.
func testZeroing(t *testing.T, newDevice NewDevice, name string, op func(blockdev.Device) func(context.Context, int64, int64) error) {
	d := newDevice(t, DefaultSize)
	model := fillDevice(t, d, 5)
	bs := int64(d.BlockSize())
	zero := op(d)
	for _, c := range []struct{ off, n int64 }{
		{bs, bs}, {1<<20 - 3*bs, 5 * bs}, {2 << 20, 1 << 20}, {1<<20 + bs, 1<<20 - 2*bs},
	} {
		if err := zero(context.Background(), c.off, c.n); err != nil {
			t.Fatalf("%s %s: %v", name, describe(c.off, c.n), err)
		}
		clear(model[c.off : c.off+c.n])
		expect(t, d, 0, model, name+" "+describe(c.off, c.n))
	}
	// A write into a zeroed range reads back, the rest of it stays zero.
	p := pattern(6, int(bs))
	write(t, d, p, 2<<20+4*bs)
	copy(model[2<<20+4*bs:], p)
	expect(t, d, 0, model, "write into a zeroed range")
	if err := zero(context.Background(), 0, d.Size()); err != nil {
		t.Fatalf("%s of the whole device: %v", name, err)
	}
	expect(t, d, 0, make([]byte, d.Size()), name+" of the whole device")
}

func testFlush(t *testing.T, newDevice NewDevice) {
	d := newDevice(t, DefaultSize)
	ctx := context.Background()
	if err := d.Flush(ctx); err != nil {
		t.Fatalf("Flush of a fresh device: %v", err)
	}
	p := pattern(7, 64<<10)
	write(t, d, p, 1<<20)
	if err := d.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if err := d.Flush(ctx); err != nil {
		t.Fatalf("second Flush: %v", err)
	}
	expect(t, d, 1<<20, p, "after Flush")
}

func testFUA(t *testing.T, newDevice NewDevice) {
	d := newDevice(t, DefaultSize)
	ctx := context.Background()
	p := pattern(8, 3*d.BlockSize())
	if err := blockdev.WriteFUA(ctx, d, p, int64(d.BlockSize())); err != nil {
		t.Fatalf("WriteFUA: %v", err)
	}
	expect(t, d, int64(d.BlockSize()), p, "after WriteFUA")
	if f, ok := d.(blockdev.FUAWriter); ok {
		q := pattern(9, d.BlockSize())
		if err := f.WriteAtFUA(ctx, q, 0); err != nil {
			t.Fatalf("WriteAtFUA: %v", err)
		}
		expect(t, d, 0, q, "after WriteAtFUA")
		wantClass(t, f.WriteAtFUA(ctx, q[:1], 0), blockdev.ErrInvalid, "misaligned WriteAtFUA")
		wantClass(t, f.WriteAtFUA(ctx, q, d.Size()), blockdev.ErrOutOfRange, "WriteAtFUA past the end")
	}
}

func testBufferReuse(t *testing.T, newDevice NewDevice) {
	d := newDevice(t, DefaultSize)
	p := pattern(10, 256<<10)
	keep := bytes.Clone(p)
	write(t, d, p, 1<<20-64<<10)
	for i := range p {
		p[i] ^= 0xff
	}
	expect(t, d, 1<<20-64<<10, keep, "after the caller changed its write buffer")
	q := read(t, d, 1<<20-64<<10, len(keep))
	clear(q)
	expect(t, d, 1<<20-64<<10, keep, "after the caller changed its read buffer")
	if !bytes.Equal(p[:8], []byte{^keep[0], ^keep[1], ^keep[2], ^keep[3], ^keep[4], ^keep[5], ^keep[6], ^keep[7]}) {
		t.Error("WriteAt modified the caller's buffer")
	}
}

func testClose(t *testing.T, newDevice NewDevice) {
	d := newDevice(t, DefaultSize)
	write(t, d, pattern(11, d.BlockSize()), 0)
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	bs := int64(d.BlockSize())
	for name, op := range ops(d, 0, bs) {
		wantClass(t, op(), blockdev.ErrUnavailable, name+" after Close")
	}
	wantClass(t, d.Flush(context.Background()), blockdev.ErrUnavailable, "Flush after Close")
}

func testAllocation(t *testing.T, newDevice NewDevice) {
	d := newDevice(t, DefaultSize)
	ar, ok := d.(blockdev.AllocationReporter)
	if !ok {
		t.Skipf("%T does not implement AllocationReporter", d)
	}
	model := make([]byte, d.Size())
	r := rand.New(rand.NewSource(12))
	for i := range 40 {
		off, n := randomRange(r, d, 32)
		if i%5 == 4 {
			if err := d.Trim(context.Background(), off, n); err != nil {
				t.Fatal(err)
			}
			clear(model[off : off+n])
			continue
		}
		p := pattern(int64(i), int(n))
		write(t, d, p, off)
		copy(model[off:], p)
	}
	bs := int64(d.BlockSize())
	for _, c := range []struct{ off, n int64 }{{0, d.Size()}, {bs, d.Size() - 2*bs}, {1<<20 + 5*bs, 77 * bs}, {0, 0}} {
		ext, err := ar.Allocated(context.Background(), c.off, c.n)
		if err != nil {
			t.Fatalf("Allocated(%s): %v", describe(c.off, c.n), err)
		}
		if err := checkExtents(ext, model, c.off, c.n, bs); err != nil {
			t.Errorf("Allocated(%s) = %v: %v", describe(c.off, c.n), ext, err)
		}
	}
	_, err := ar.Allocated(context.Background(), 1, bs)
	wantClass(t, err, blockdev.ErrInvalid, "misaligned Allocated")
	_, err = ar.Allocated(context.Background(), d.Size(), bs)
	wantClass(t, err, blockdev.ErrOutOfRange, "Allocated past the end")
}

// checkExtents checks that ext is ordered, disjoint, inside [off, off+n) and
// covers every block of the range that holds a non-zero byte.
func checkExtents(ext []blockdev.Extent, model []byte, off, n, bs int64) error {
	end := off
	for _, e := range ext {
		if e.Off < end || e.Len <= 0 || e.Off+e.Len > off+n {
			return fmt.Errorf("extent %+v out of order, empty or outside the range", e)
		}
		if e.Off%bs != 0 || e.Len%bs != 0 {
			return fmt.Errorf("extent %+v not block aligned", e)
		}
		if i := firstNonZero(model[end:e.Off]); i >= 0 {
			return fmt.Errorf("non-zero data at %d outside every extent", end+int64(i))
		}
		end = e.Off + e.Len
	}
	if i := firstNonZero(model[end : off+n]); i >= 0 {
		return fmt.Errorf("non-zero data at %d after the last extent", end+int64(i))
	}
	return nil
}

func firstNonZero(p []byte) int {
	for i, b := range p {
		if b != 0 {
			return i
		}
	}
	return -1
}
