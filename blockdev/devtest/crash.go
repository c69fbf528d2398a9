package devtest

import (
	"context"
	"fmt"
	"hash/crc32"
	"math/rand"
	"slices"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
)

// NewCrashable returns a new, zero-filled device of size bytes together with
// crash, which returns what the device would hold after a power loss at the
// moment of the call, leaving the device itself as it was.
type NewCrashable func(t *testing.T, size int64) (d blockdev.Device, crash func() blockdev.Device)

// RunCrash checks the durability half of the contract on a device that can
// simulate a power loss: data written before a completed Flush survives, FUA
// writes survive without a Flush, and every block of the crashed device
// holds either its durable value or a value written to it since. Unflushed
// data may or may not survive.
func RunCrash(t *testing.T, newDevice NewCrashable) {
	t.Run("FlushedSurvives", func(t *testing.T) { testFlushedSurvives(t, newDevice) })
	t.Run("FUASurvives", func(t *testing.T) { testFUASurvives(t, newDevice) })
	t.Run("RandomCrashes", func(t *testing.T) { testRandomCrashes(t, newDevice) })
}

func flush(t *testing.T, d blockdev.Device) {
	t.Helper()
	if err := d.Flush(context.Background()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

func testFlushedSurvives(t *testing.T, newDevice NewCrashable) {
	d, crash := newDevice(t, DefaultSize)
	a := pattern(20, 1<<20)
	write(t, d, a, 512<<10)
	flush(t, d)
	write(t, d, pattern(21, 64<<10), 3<<20) // unflushed, elsewhere
	c := crash()
	defer c.Close()
	expect(t, c, 512<<10, a, "flushed data after a crash")
	expect(t, d, 512<<10, a, "the device itself after taking a crash image")
	// The crashed device is a working device.
	b := pattern(22, 8192)
	write(t, c, b, 0)
	expect(t, c, 0, b, "write to the crashed device")
}

func testFUASurvives(t *testing.T, newDevice NewCrashable) {
	d, crash := newDevice(t, DefaultSize)
	ctx := context.Background()
	write(t, d, pattern(23, 64<<10), 0)
	flush(t, d)
	write(t, d, pattern(24, 16<<10), 0) // unflushed, then overwritten by FUA below
	a := pattern(25, 8<<10)
	if err := blockdev.WriteFUA(ctx, d, a, 4096); err != nil {
		t.Fatalf("WriteFUA: %v", err)
	}
	b := pattern(26, 1<<20)
	if err := blockdev.WriteFUA(ctx, d, b, 2<<20); err != nil {
		t.Fatalf("WriteFUA: %v", err)
	}
	c := crash()
	defer c.Close()
	expect(t, c, 4096, a, "FUA write over unflushed data after a crash")
	expect(t, c, 2<<20, b, "FUA write after a crash")
}

// crashModel tracks, per block, the durable value and the values written
// since the last flush, as CRC32s of the block.
type crashModel struct {
	bs       int64
	cur      [][]byte   // current contents per block
	durable  []uint32   // checksum of the durable value
	since    [][]uint32 // checksums written since the last flush
	zeroHash uint32
}

func newCrashModel(size, bs int64) *crashModel {
	n := size / bs
	m := &crashModel{bs: bs, cur: make([][]byte, n), durable: make([]uint32, n), since: make([][]uint32, n)}
	m.zeroHash = crc32.ChecksumIEEE(make([]byte, bs))
	for i := range m.durable {
		m.durable[i] = m.zeroHash
		m.cur[i] = make([]byte, bs)
	}
	return m
}

// write records p (nil: zeros) at off; fua makes it durable at once.
func (m *crashModel) write(p []byte, off, n int64, fua bool) {
	for b := off / m.bs; b < (off+n)/m.bs; b++ {
		if p == nil {
			clear(m.cur[b])
		} else {
			copy(m.cur[b], p[(b*m.bs-off):])
		}
		h := crc32.ChecksumIEEE(m.cur[b])
		if fua {
			m.durable[b], m.since[b] = h, nil
		} else {
			m.since[b] = append(m.since[b], h)
		}
	}
}

func (m *crashModel) flush() {
	for b := range m.cur {
		m.durable[b] = crc32.ChecksumIEEE(m.cur[b])
		m.since[b] = nil
	}
}

// check verifies a crashed image: each block holds its durable value or one
// written since.
func (m *crashModel) check(img []byte) error {
	for b := range m.cur {
		h := crc32.ChecksumIEEE(img[int64(b)*m.bs:][:m.bs])
		if h != m.durable[b] && !slices.Contains(m.since[b], h) {
			return fmt.Errorf("block %d holds a value that was neither flushed nor written since the last flush", b)
		}
	}
	return nil
}

func testRandomCrashes(t *testing.T, newDevice NewCrashable) {
	d, crash := newDevice(t, 1<<20)
	ctx := context.Background()
	m := newCrashModel(d.Size(), int64(d.BlockSize()))
	r := rand.New(rand.NewSource(27))
	for step := range 300 {
		off, n := randomRange(r, d, 16)
		var err error
		switch k := r.Intn(12); {
		case k < 6:
			p := pattern(int64(100+step), int(n))
			fua := k == 5
			m.write(p, off, n, fua)
			if fua {
				err = blockdev.WriteFUA(ctx, d, p, off)
			} else {
				err = d.WriteAt(ctx, p, off)
			}
		case k < 8:
			m.write(nil, off, n, false)
			err = d.Trim(ctx, off, n)
		case k < 10:
			m.flush()
			err = d.Flush(ctx)
		default:
			checkCrash(t, crash, m, d.Size())
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	checkCrash(t, crash, m, d.Size())
}

func checkCrash(t *testing.T, crash func() blockdev.Device, m *crashModel, size int64) {
	t.Helper()
	c := crash()
	defer c.Close()
	img := read(t, c, 0, int(size))
	if err := m.check(img); err != nil {
		t.Fatal(err)
	}
}
