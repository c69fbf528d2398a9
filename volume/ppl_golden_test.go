package volume

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/nvstripe/nvstripe/volume/layout"
)

// Format 3 volumes exist in the field: a record written by this code must
// read back in the recovery of older code and the other way round. These
// tests pin the bytes the write path puts on disk, captured from the code
// that first shipped format 3; a change in them is a format change, not a
// refactor.

// goldenRecord is the fixed record of testdata/log-record-k4m2.bin: two
// partial rows (a partial-parity block each), a full row and an untouched
// one, in a 4+2 geometry.
func goldenRecord() (layout.Geometry, logRecord) {
	g := pplLayouts[1]
	rec := logRecord{seq: logSeq{3, 41}, tail: logSeq{2, 17}, seg: 1, stripe: 6, r0: 0,
		touched: []uint32{0b0101, 0b1111, 0, 0b1000}, sums: make([][2]uint32, 4*g.K),
		pp: [][]byte{addPattern(4096, 7), nil, nil, addPattern(4096, 9)}}
	for i := range rec.sums {
		rec.sums[i] = [2]uint32{0x01010101 * uint32(i), 0xfedcba98 ^ uint32(i)}
	}
	return g, rec
}

// TestLogRecordGolden: the encoder renders goldenRecord byte for byte as
// the file holds it, and the decoder reads the file back into it.
func TestLogRecordGolden(t *testing.T) {
	g, rec := goldenRecord()
	want, err := os.ReadFile(filepath.Join("testdata", "log-record-k4m2.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.encode(g); !bytes.Equal(got, want) {
		t.Fatalf("encoded record (%d bytes, sha256 %x) differs from testdata (%d bytes, sha256 %x): the on-disk format changed",
			len(got), sha256.Sum256(got), len(want), sha256.Sum256(want))
	}
	got, n, ok := decodeRecord(g, want)
	if !ok || n != int64(len(want))/layout.ChecksumBlock || got.seq != rec.seq || got.tail != rec.tail ||
		got.seg != rec.seg || got.stripe != rec.stripe || got.r0 != rec.r0 ||
		fmt.Sprint(got.touched, got.sums) != fmt.Sprint(rec.touched, rec.sums) ||
		!bytes.Equal(got.pp[0], rec.pp[0]) || !bytes.Equal(got.pp[3], rec.pp[3]) || got.pp[1] != nil || got.pp[2] != nil {
		t.Fatalf("golden record decoded ok=%v n=%d: not the record of goldenRecord", ok, n)
	}
}

// goldenImages are the sha256 (first 8 bytes) of every namespace after
// goldenWorkload, by geometry (pplLayouts) and namespace, from main at
// 68345c3 with one change: a record's checksums of the rows it covers
// but no write touched are zero. Before, they were whatever an ended
// epoch reused from another stripe held (recovery never reads them), so
// the images varied from run to run; every record decoded the same
// otherwise. Then a second change, of when records die, not of what
// they hold: a write that goes around the namespace taken down in
// phase 1 flushes before it returns (flushAround), so records are freed
// and checksum pages written earlier there (ring tails and positions);
// the down namespace's image and TestLogRecordGolden are unchanged.
var goldenImages = map[string][]string{
	"3+1": {"82c467111c61995c", "c4171942b67974e0", "719a239c7cdda3d5", "64716855802a453c"},
	"4+2": {"196853f175c3b3a9", "d4a6f13a69fd7679", "5c26a25f845fd380", "ea421e861a3a8f97", "71a1efc8e18bb54e", "c4a04a08019dd742"},
}

// TestWritePathGolden runs goldenWorkload and compares the namespaces'
// whole contents (data, parity, checksums and write log) with
// goldenImages: the records' partial parity, checksums, sequences and ring
// positions, and every other byte a write puts on disk.
func TestWritePathGolden(t *testing.T) {
	for _, g := range pplLayouts {
		name := fmt.Sprintf("%d+%d", g.K, g.M)
		got := goldenWorkload(t, g)
		if want := goldenImages[name]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: namespace images\n got %q\nwant %q", name, got, want)
		}
	}
}

// goldenWorkload writes a fixed sequence to a new volume of g over
// in-memory namespaces (synchronous: the records' sequences are
// deterministic) and returns the sha256 of each namespace. The sequence
// covers what the write log distinguishes: full stripes, delta writes of
// one block and of several rows, writes across chunks, rewrites of a
// stripe within one epoch, a stripe write with full rows and partial
// ones, flushes between epochs, and writes with a
// namespace down (reconstruct-write and rebuild plans).
func goldenWorkload(t *testing.T, g layout.Geometry) []string {
	ctx := context.Background()
	size := 2 * g.SegmentData()
	dm, slots, mems := memNamespaces(t, g, 3)
	v, err := New(Options{Geometry: g, Size: size, Devices: dm, Alloc: NewMemAllocator(g.N(), slots), LogEpoch: 5})
	if err != nil {
		t.Fatal(err)
	}
	stripe := g.Chunk * int64(g.K)
	for off := int64(0); off < size; off += stripe {
		// One stripe a call: the first opens the namespaces, and a
		// volume learns only then that their IO is synchronous.
		if err := v.WriteAt(ctx, addPattern(int(stripe), byte(off/stripe)), off); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewSource(11))
	write := func(n int64) {
		off := rng.Int63n((size-n)/4096) * 4096
		if err := v.WriteAt(ctx, addPattern(int(n), byte(rng.Intn(250))), off); err != nil {
			t.Fatalf("write %d at %d: %v", n, off, err)
		}
	}
	for phase := 0; phase < 2; phase++ {
		if phase == 1 {
			mems[1].SetUnavailable(true)
		}
		for i := 0; i < 120; i++ {
			switch i % 7 {
			case 0, 1:
				write(4096)
			case 2:
				write(3 * 4096)
			case 3:
				write(g.Chunk + 4096)
			case 4:
				write(stripe)
			case 6:
				write(stripe + 2*4096) // full rows and partial rows in one stripe
			case 5:
				// The same stripe again, in the same epoch.
				off := rng.Int63n(size/stripe) * stripe
				for j := int64(0); j < 3; j++ {
					if err := v.WriteAt(ctx, addPattern(4096, byte(j+1)), off+j*g.Chunk/2); err != nil {
						t.Fatal(err)
					}
				}
			}
			if i%25 == 24 {
				if err := v.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	mems[1].SetUnavailable(false)
	var out []string
	for _, m := range mems {
		b := make([]byte, m.Size())
		if err := m.ReadAt(ctx, b, 0); err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		out = append(out, hex.EncodeToString(h[:8]))
	}
	return out
}
