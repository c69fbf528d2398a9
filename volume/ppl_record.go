package volume

import (
	"encoding/binary"
	"github.com/nvstripe/nvstripe/crc32c"

	"github.com/nvstripe/nvstripe/volume/layout"
)

// A write-log record (format 3, see ppl.go) on disk, little endian:
//
//	0   magic "NVPL" (u32), version 1 (u16), first row covered r0 (u16)
//	8   sequence: epoch (u64), number (u64)
//	24  tail: epoch (u64), number (u64) — records of the same ring older
//	    than this were dead when this one was written
//	40  segment (i64), stripe (i64)
//	56  rows covered n (u16), zero (u16 and u32)
//	64  crc32c of the body (everything from 72 to the record's end)
//	68  crc32c of bytes 0..68
//
// The body, from 72: per row r0..r0+n-1, the bitmap of the data shards
// written in the row since the stripe's epoch began (u32; bit 31: no
// partial parity for the row) and per data shard the checksum of the
// block at the epoch's start and of its latest value (u32 each); padding
// to whole blocks; then one partial-parity block per row whose bitmap is
// neither 0 nor every data shard, in row order. The body is the same in
// every copy of a record; the fixed part differs (each ring's sequence).
const (
	logMagic   = 0x4c50564e
	logVersion = 1
	noPPBit    = 1 << 31
	logBodyCRC = 64
	logHeadCRC = 68
)

// logSeq orders records: the owner epoch that wrote it, then a counter.
type logSeq struct{ epoch, n uint64 }

func (a logSeq) less(b logSeq) bool {
	return a.epoch < b.epoch || (a.epoch == b.epoch && a.n < b.n)
}

// logRecord is one decoded (or to be encoded) record: the state of one
// stripe's epoch (stripeEpoch) as of one write.
type logRecord struct {
	seq, tail   logSeq
	seg, stripe int64
	r0          int64       // first row covered
	touched     []uint32    // per covered row
	sums        [][2]uint32 // per covered row and data shard: (r-r0)*K + i
	pp          [][]byte    // per covered row: partial parity block, or nil
}

// covers reports whether row r had a write in the record's epoch, and
// returns its index.
func (r *logRecord) covers(row int64) (int, bool) {
	i := row - r.r0
	if i < 0 || i >= int64(len(r.touched)) || r.touched[i]&^noPPBit == 0 {
		return 0, false
	}
	return int(i), true
}

// partial reports whether a row's bitmap needs a partial-parity block.
func partialRow(bits uint32, k int) bool {
	b := bits &^ noPPBit
	return b != 0 && b != uint32(1)<<k-1 && bits&noPPBit == 0
}

// size is the record's length in blocks.
func (r *logRecord) size(g layout.Geometry) int64 {
	n := g.LogHeaderBlocks(int64(len(r.touched)))
	for _, t := range r.touched {
		if partialRow(t, g.K) {
			n++
		}
	}
	return n
}

// encodeBody renders everything but the sequence and tail (stamp) in
// g's format into buf, of the record's size (any contents).
func (r *logRecord) encodeBody(g layout.Geometry, buf []byte) {
	rows := int64(len(r.touched))
	hb := g.LogHeaderBlocks(rows)
	le := binary.LittleEndian
	clear(buf[:layout.LogHeaderFixed])
	le.PutUint32(buf[0:], logMagic)
	le.PutUint16(buf[4:], logVersion)
	le.PutUint16(buf[6:], uint16(r.r0))
	le.PutUint64(buf[40:], uint64(r.seg))
	le.PutUint64(buf[48:], uint64(r.stripe))
	le.PutUint16(buf[56:], uint16(rows))
	at := layout.LogHeaderFixed
	for row, t := range r.touched {
		le.PutUint32(buf[at:], t)
		at += 4
		for i := 0; i < g.K; i++ {
			s := r.sums[row*g.K+i]
			le.PutUint32(buf[at:], s[0])
			le.PutUint32(buf[at+4:], s[1])
			at += 8
		}
	}
	clear(buf[at : hb*layout.ChecksumBlock])
	at = int(hb * layout.ChecksumBlock)
	for row, t := range r.touched {
		if partialRow(t, g.K) {
			copy(buf[at:at+layout.ChecksumBlock], r.pp[row])
			at += layout.ChecksumBlock
		}
	}
	le.PutUint32(buf[logBodyCRC:], crc32c.Checksum(buf[layout.LogHeaderFixed:]))
}

// stamp writes the sequence and tail into an encoded record and seals its
// fixed part.
func stamp(buf []byte, seq, tail logSeq) {
	le := binary.LittleEndian
	le.PutUint64(buf[8:], seq.epoch)
	le.PutUint64(buf[16:], seq.n)
	le.PutUint64(buf[24:], tail.epoch)
	le.PutUint64(buf[32:], tail.n)
	le.PutUint32(buf[logHeadCRC:], crc32c.Checksum(buf[:logHeadCRC]))
}

// encode renders the record in g's format.
func (r *logRecord) encode(g layout.Geometry) []byte {
	buf := make([]byte, r.size(g)*layout.ChecksumBlock)
	r.encodeBody(g, buf)
	stamp(buf, r.seq, r.tail)
	return buf
}

// decodeRecord parses the record that starts at b (the rest of the ring
// from a block boundary). It returns the record and its length in blocks,
// or ok=false when b holds no whole, intact record of g's format.
func decodeRecord(g layout.Geometry, b []byte) (rec *logRecord, blocks int64, ok bool) {
	le := binary.LittleEndian
	if len(b) < layout.ChecksumBlock || le.Uint32(b[0:]) != logMagic || le.Uint16(b[4:]) != logVersion ||
		le.Uint32(b[logHeadCRC:]) != crc32c.Checksum(b[:logHeadCRC]) {
		return nil, 0, false
	}
	rows := int64(le.Uint16(b[56:]))
	r0 := int64(le.Uint16(b[6:]))
	if rows < 1 || r0+rows > g.BlocksPerChunk() {
		return nil, 0, false
	}
	hb := g.LogHeaderBlocks(rows)
	if hb*layout.ChecksumBlock > int64(len(b)) {
		return nil, 0, false
	}
	r := &logRecord{
		seq: logSeq{le.Uint64(b[8:]), le.Uint64(b[16:])}, tail: logSeq{le.Uint64(b[24:]), le.Uint64(b[32:])},
		seg: int64(le.Uint64(b[40:])), stripe: int64(le.Uint64(b[48:])), r0: r0,
		touched: make([]uint32, rows), sums: make([][2]uint32, rows*int64(g.K)), pp: make([][]byte, rows),
	}
	at := layout.LogHeaderFixed
	pp := int64(0)
	for row := range r.touched {
		r.touched[row] = le.Uint32(b[at:])
		at += 4
		for i := 0; i < g.K; i++ {
			r.sums[row*g.K+i] = [2]uint32{le.Uint32(b[at:]), le.Uint32(b[at+4:])}
			at += 8
		}
		if partialRow(r.touched[row], g.K) {
			pp++
		}
	}
	n := (hb + pp) * layout.ChecksumBlock
	if n > int64(len(b)) {
		return nil, 0, false
	}
	whole := b[:n]
	if le.Uint32(whole[logBodyCRC:]) != crc32c.Checksum(whole[layout.LogHeaderFixed:]) {
		return nil, 0, false
	}
	at = int(hb * layout.ChecksumBlock)
	for row, t := range r.touched {
		if partialRow(t, g.K) {
			r.pp[row] = whole[at : at+layout.ChecksumBlock]
			at += layout.ChecksumBlock
		}
	}
	return r, hb + pp, true
}
