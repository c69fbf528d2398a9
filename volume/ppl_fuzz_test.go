package volume

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/nvstripe/nvstripe/crc32c"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// FuzzDecodeRecord feeds a slot's write-log area (what recovery reads from
// a disk after a crash) to decodeRecord, for each layout of pplLayouts.
// With seal set the harness first pads the input with zeros to the length
// of the record its header describes and writes both checksums the decoder
// expects, so that the fuzzer reaches the parsing behind them with short
// inputs (the header's first bytes and rows). Nothing may
// panic; a decoded record stays inside its input and its chunk (rows,
// partial-parity blocks, length at most LogRecordMax), and encodes to a
// record that decodes to the same and holds the input's bytes wherever the
// decoder reads them. The seed corpus is in testdata/fuzz.
func FuzzDecodeRecord(f *testing.F) {
	for i, g := range pplLayouts {
		rec := fuzzRecord(g)
		f.Add(byte(i), false, rec.encode(g))
		f.Add(byte(i), true, rec.encode(g)[:layout.LogHeaderFixed+3*g.LogRowBytes()])
	}
	f.Fuzz(func(t *testing.T, layoutIdx byte, seal bool, b []byte) {
		g := pplLayouts[int(layoutIdx)%len(pplLayouts)]
		if seal {
			b = sealRecord(g, b)
		}
		rec, blocks, ok := decodeRecord(g, b)
		if !ok {
			return
		}
		checkRecord(t, g, rec, blocks, len(b))
		enc := rec.encode(g)
		again, n, ok := decodeRecord(g, enc)
		if !ok || n != blocks || fmt.Sprint(again) != fmt.Sprint(rec) {
			t.Fatalf("re-encoded record decodes to %+v (%d blocks, ok %v), want %+v (%d blocks)", again, n, ok, rec, blocks)
		}
		for _, r := range readBytes(g, rec) {
			if !bytes.Equal(enc[r[0]:r[1]], b[r[0]:r[1]]) {
				t.Fatalf("record %+v re-encodes bytes %d..%d to %x, want %x", rec, r[0], r[1], enc[r[0]:r[1]], b[r[0]:r[1]])
			}
		}
	})
}

// fuzzRecord is a valid record of g: rows 1..3 of stripe 1 of segment 2,
// one of them partial.
func fuzzRecord(g layout.Geometry) *logRecord {
	all := uint32(1)<<g.K - 1
	rec := &logRecord{seq: logSeq{3, 9}, tail: logSeq{3, 4}, seg: 2, stripe: 1, r0: 1,
		touched: []uint32{0b1, all, 0}, sums: make([][2]uint32, 3*g.K), pp: [][]byte{testutil.Pattern(4096, 5), nil, nil}}
	for i := range rec.sums {
		rec.sums[i] = [2]uint32{uint32(7 * i), uint32(11 * i)}
	}
	return rec
}

// sealRecord returns b padded with zeros to the length of the record its
// header describes (at least a block), with that record's body and header
// checksums written.
func sealRecord(g layout.Geometry, b []byte) []byte {
	le := binary.LittleEndian
	b = append(b, make([]byte, max(0, layout.ChecksumBlock-len(b)))...)
	rows, r0 := int64(le.Uint16(b[56:])), int64(le.Uint16(b[6:]))
	if rows >= 1 && r0+rows <= g.BlocksPerChunk() {
		n := g.LogHeaderBlocks(rows) * layout.ChecksumBlock
		b = append(b, make([]byte, max(0, n-int64(len(b))))...)
		for row := range rows {
			if partialRow(le.Uint32(b[layout.LogHeaderFixed+row*g.LogRowBytes():]), g.K) {
				n += layout.ChecksumBlock
			}
		}
		b = append(b, make([]byte, max(0, n-int64(len(b))))...)
		le.PutUint32(b[logBodyCRC:], crc32c.Checksum(b[layout.LogHeaderFixed:n]))
	}
	le.PutUint32(b[logHeadCRC:], crc32c.Checksum(b[:logHeadCRC]))
	return b
}

// checkRecord checks a decoded record's bounds: of its input (size bytes),
// its chunk and the largest record of g.
func checkRecord(t *testing.T, g layout.Geometry, rec *logRecord, blocks int64, size int) {
	rows := int64(len(rec.touched))
	switch {
	case blocks < 1 || blocks*layout.ChecksumBlock > int64(size):
		t.Fatalf("record of %d blocks decoded from %d bytes", blocks, size)
	case blocks > g.LogRecordMax() || blocks != rec.size(g):
		t.Fatalf("record of %d blocks: its rows need %d, the largest is %d", blocks, rec.size(g), g.LogRecordMax())
	case rows < 1 || rec.r0 < 0 || rec.r0+rows > g.BlocksPerChunk():
		t.Fatalf("record covers rows %d..%d of a chunk of %d", rec.r0, rec.r0+rows-1, g.BlocksPerChunk())
	case int64(len(rec.sums)) != rows*int64(g.K) || len(rec.pp) != len(rec.touched):
		t.Fatalf("record of %d rows has %d checksum pairs and %d partial-parity slots", rows, len(rec.sums), len(rec.pp))
	}
	for row, bits := range rec.touched {
		if partialRow(bits, g.K) != (rec.pp[row] != nil) || (rec.pp[row] != nil && len(rec.pp[row]) != layout.ChecksumBlock) {
			t.Fatalf("row %d (bitmap %#x): partial-parity block of %d bytes", row, bits, len(rec.pp[row]))
		}
	}
}

// readBytes are the byte ranges of an encoded record that the decoder
// reads: everything but the reserved bytes of the fixed part (58..64),
// the checksums, and the header block's padding after the rows (the
// decoder does not look at these; they count only in the checksums).
func readBytes(g layout.Geometry, rec *logRecord) [][2]int64 {
	rows := int64(len(rec.touched))
	return [][2]int64{
		{0, 58},
		{layout.LogHeaderFixed, layout.LogHeaderFixed + rows*g.LogRowBytes()},
		{g.LogHeaderBlocks(rows) * layout.ChecksumBlock, rec.size(g) * layout.ChecksumBlock},
	}
}
