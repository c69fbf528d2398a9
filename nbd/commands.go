package nbd

import (
	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// Limits on the chunks of one reply.
const (
	// maxReadPieces bounds the data/hole chunks of one READ; a more
	// fragmented range is sent as one data chunk.
	maxReadPieces = 64
	// maxDescriptors bounds the extents of one BLOCK_STATUS reply (the
	// protocol lets the server describe less than the request).
	maxDescriptors = 1 << 16
)

// exec runs r.req against the export and sets r's answer, or returns the
// error to answer with.
func (c *conn) exec(r *reply) error {
	req := r.req
	if err := proto.CheckFlags(req, c.tflags); err != nil {
		return reqErr(proto.EINVAL, "%v", err)
	}
	var err error
	switch req.Type {
	case proto.CmdRead:
		return c.read(r)
	case proto.CmdBlockStatus:
		return c.blockStatus(r)
	case proto.CmdWrite:
		err = c.write(r)
	case proto.CmdFlush:
		err = c.exp.Device.Flush(c.ioCtx)
	case proto.CmdTrim:
		err = c.trim(req)
	case proto.CmdWriteZeroes:
		err = c.writeZeroes(req)
	case proto.CmdCache:
		err = c.check(req, proto.EINVAL)
	default:
		err = reqErr(proto.EINVAL, "unknown command %v", req.Type)
	}
	if err != nil {
		return err
	}
	c.ok(r)
	return nil
}

// check validates a request's range: past the end is pastEnd, misaligned is
// EINVAL.
func (c *conn) check(req proto.Request, pastEnd proto.Errno) error {
	size := uint64(c.exp.Device.Size())
	if req.Offset > size || uint64(req.Length) > size-req.Offset {
		return reqErr(pastEnd, "%v at %d+%d is past the end of the export (%d bytes)", req.Type, req.Offset, req.Length, size)
	}
	if req.Offset%minBlock != 0 || req.Length%minBlock != 0 {
		return reqErr(proto.EINVAL, "%v at %d+%d is not aligned to %d bytes", req.Type, req.Offset, req.Length, minBlock)
	}
	return nil
}

func (c *conn) checkWritable(req proto.Request) error {
	if c.exp.ReadOnly {
		return reqErr(proto.EPERM, "export %q is read-only", c.exp.name)
	}
	return nil
}

func (c *conn) write(r *reply) error {
	req := r.req
	if err := c.checkWritable(req); err != nil {
		return err
	}
	if err := c.check(req, proto.ENOSPC); err != nil {
		return err
	}
	err := c.exp.bio.WriteAt(c.ioCtx, *r.payload, int64(req.Offset), req.Flags&proto.CmdFlagFUA != 0)
	c.putBuf(r.payload)
	r.payload = nil
	return err
}

func (c *conn) trim(req proto.Request) error {
	if err := c.checkWritable(req); err != nil {
		return err
	}
	if err := c.check(req, proto.EINVAL); err != nil {
		return err
	}
	if err := c.exp.bio.TrimInner(c.ioCtx, int64(req.Offset), int64(req.Length)); err != nil {
		return err
	}
	return c.flushIfFUA(req)
}

func (c *conn) writeZeroes(req proto.Request) error {
	if err := c.checkWritable(req); err != nil {
		return err
	}
	if err := c.check(req, proto.ENOSPC); err != nil {
		return err
	}
	off, n := int64(req.Offset), int64(req.Length)
	noHole := req.Flags&proto.CmdFlagNoHole != 0
	if req.Flags&proto.CmdFlagFastZero != 0 {
		fz, ok := c.exp.Device.(FastZeroer)
		if !ok || !c.exp.bio.Aligned(off, n) || !fz.ZeroIsFast(off, n, !noHole) {
			return reqErr(proto.ENOTSUP, "zeroing %d+%d is not fast on this export", off, n)
		}
	}
	if n == 0 {
		return nil
	}
	if err := c.exp.bio.Zero(c.ioCtx, off, n, noHole); err != nil {
		return err
	}
	return c.flushIfFUA(req)
}

func (c *conn) flushIfFUA(req proto.Request) error {
	if req.Flags&proto.CmdFlagFUA == 0 {
		return nil
	}
	return c.exp.Device.Flush(c.ioCtx)
}

// piece is a part of a READ: data to read or a hole that reads as zeros.
type piece struct {
	off, n int64
	hole   bool
}

// read answers a READ: a simple reply with the data, or structured chunks
// (OFFSET_HOLE for unallocated parts where the device reports them).
func (c *conn) read(r *reply) error {
	req := r.req
	if int64(req.Length) > int64(c.s.opts.MaxRequest) {
		return reqErr(proto.EINVAL, "READ of %d bytes over the maximum payload %d", req.Length, c.s.opts.MaxRequest)
	}
	if err := c.check(req, proto.EINVAL); err != nil {
		return err
	}
	if req.Length == 0 {
		c.ok(r)
		return nil
	}
	off, n := int64(req.Offset), int64(req.Length)
	var err error
	if r.buf, err = c.getReadBuf(int(n)); err != nil {
		return err
	}
	buf := *r.buf
	pieces := c.pieces(off, n, req.Flags&proto.CmdFlagDF != 0)
	for _, p := range pieces {
		if !p.hole {
			if err := c.exp.bio.ReadAt(c.ioCtx, buf[p.off-off:p.off-off+p.n], p.off); err != nil {
				return err
			}
		}
	}
	if !c.structured {
		r.hdr = proto.AppendSimpleReply(r.hdr, 0, req.Cookie)
		r.segs = append(r.segs, r.hdr, buf)
		return nil
	}
	r.reserve(len(pieces) * (proto.ChunkHeaderSize + 12))
	for i, p := range pieces {
		last, at := i == len(pieces)-1, len(r.hdr)
		if p.hole {
			r.hdr = proto.AppendOffsetHole(r.hdr, req.Cookie, last, uint64(p.off), uint32(p.n))
			r.segs = append(r.segs, r.hdr[at:])
			continue
		}
		r.hdr = proto.AppendOffsetDataHeader(r.hdr, req.Cookie, last, uint64(p.off), int(p.n))
		r.segs = append(r.segs, r.hdr[at:], buf[p.off-off:p.off-off+p.n])
	}
	return nil
}

// pieces splits a READ into data and holes when the reply can say so.
func (c *conn) pieces(off, n int64, df bool) []piece {
	all := []piece{{off: off, n: n}}
	ar, ok := c.exp.Device.(blockdev.AllocationReporter)
	if !c.structured || df || !ok || !c.exp.bio.Aligned(off, n) {
		return all
	}
	exts, err := ar.Allocated(c.ioCtx, off, n)
	if err != nil {
		return all // the read itself reports a failing device
	}
	ps, ok := toPieces(off, n, exts)
	if !ok || len(ps) > maxReadPieces {
		return all
	}
	return ps
}

// toPieces turns the allocated extents of [off, off+n) into alternating
// data and hole pieces covering the range. It refuses (false) extents that
// are unordered, outside the range or not 512-aligned.
func toPieces(off, n int64, exts []blockdev.Extent) ([]piece, bool) {
	ps := make([]piece, 0, 2*len(exts)+1)
	at, end := off, off+n
	for _, e := range exts {
		if e.Len == 0 {
			continue
		}
		if e.Off < at || e.Len < 0 || e.Off+e.Len > end || e.Off%minBlock != 0 || e.Len%minBlock != 0 {
			return nil, false
		}
		if e.Off > at {
			ps = append(ps, piece{off: at, n: e.Off - at, hole: true})
		}
		if k := len(ps) - 1; k >= 0 && !ps[k].hole && ps[k].off+ps[k].n == e.Off {
			ps[k].n += e.Len
		} else {
			ps = append(ps, piece{off: e.Off, n: e.Len})
		}
		at = e.Off + e.Len
	}
	if at < end {
		ps = append(ps, piece{off: at, n: end - at, hole: true})
	}
	return ps, true
}

// blockStatus answers BLOCK_STATUS for base:allocation.
func (c *conn) blockStatus(r *reply) error {
	req := r.req
	if c.metaID == 0 {
		return reqErr(proto.EINVAL, "BLOCK_STATUS without a negotiated metadata context")
	}
	if req.Length == 0 {
		return reqErr(proto.EINVAL, "BLOCK_STATUS of length 0")
	}
	if err := c.check(req, proto.EINVAL); err != nil {
		return err
	}
	desc, err := c.allocation(int64(req.Offset), int64(req.Length))
	if err != nil {
		return err
	}
	if req.Flags&proto.CmdFlagReqOne != 0 {
		desc = desc[:1]
	}
	r.hdr = proto.AppendBlockStatus(r.hdr, req.Cookie, true, c.metaID, desc)
	r.segs = append(r.segs, r.hdr)
	return nil
}

// allocation describes [off, off+n) for base:allocation: allocated extents
// as data (0), the rest as holes reading as zeros (HOLE|ZERO).
func (c *conn) allocation(off, n int64) ([]proto.BlockDescriptor, error) {
	all := []proto.BlockDescriptor{{Length: uint32(n)}}
	ar, ok := c.exp.Device.(blockdev.AllocationReporter)
	if !ok {
		return all, nil
	}
	s0, sn := c.exp.bio.Span(off, n)
	exts, err := ar.Allocated(c.ioCtx, s0, sn)
	if err != nil {
		return nil, err
	}
	for i := range exts { // clip the device-aligned answer to the request
		e0, e1 := max(exts[i].Off, off), min(exts[i].Off+exts[i].Len, off+n)
		exts[i] = blockdev.Extent{Off: e0, Len: max(e1-e0, 0)}
	}
	ps, ok := toPieces(off, n, exts)
	if !ok {
		return all, nil
	}
	desc := make([]proto.BlockDescriptor, 0, min(len(ps), maxDescriptors))
	for _, p := range ps[:min(len(ps), maxDescriptors)] {
		d := proto.BlockDescriptor{Length: uint32(p.n)}
		if p.hole {
			d.Status = proto.StateHole | proto.StateZero
		}
		desc = append(desc, d)
	}
	return desc, nil
}
