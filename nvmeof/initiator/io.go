package initiator

import (
	"context"
	"sync"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// maxWZBlocks is the most blocks one Write Zeroes covers (16-bit NLB).
const maxWZBlocks = 1 << 16

func (d *Device) check(off, n int64) error {
	if d.isClosed() {
		return blockdev.Mark(errClosed, blockdev.ErrUnavailable)
	}
	return blockdev.CheckRange(d.size, d.bs, off, n)
}

// ReadAt reads len(p) bytes at off; the data lands in p directly.
func (d *Device) ReadAt(ctx context.Context, p []byte, off int64) error {
	if err := d.check(off, int64(len(p))); err != nil {
		return err
	}
	if len(p) <= d.maxXfr {
		return d.readChunk(ctx, p, off)
	}
	return d.split(ctx, p, off, d.readChunk)
}

func (d *Device) readChunk(ctx context.Context, p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	r := request{op: "read", sqe: d.rwSQE(pdu.IORead, p, off, 0), data: p, dir: dirC2H}
	_, err := d.exec(ctx, &r, kindRead)
	return err
}

// WriteAt writes p at off.
func (d *Device) WriteAt(ctx context.Context, p []byte, off int64) error {
	return d.write(ctx, p, off, 0)
}

// WriteAtFUA writes p at off with Force Unit Access: the data is durable
// when it returns nil.
func (d *Device) WriteAtFUA(ctx context.Context, p []byte, off int64) error {
	return d.write(ctx, p, off, pdu.RWFUA)
}

func (d *Device) write(ctx context.Context, p []byte, off int64, ctl uint32) error {
	if err := d.check(off, int64(len(p))); err != nil {
		return err
	}
	if len(p) <= d.maxXfr {
		return d.writeChunk(ctx, p, off, ctl)
	}
	return d.split(ctx, p, off, func(ctx context.Context, p []byte, off int64) error {
		return d.writeChunk(ctx, p, off, ctl)
	})
}

func (d *Device) writeChunk(ctx context.Context, p []byte, off int64, ctl uint32) error {
	if len(p) == 0 {
		return nil
	}
	r := request{op: "write", sqe: d.rwSQE(pdu.IOWrite, p, off, ctl), data: p, dir: dirH2C}
	_, err := d.exec(ctx, &r, kindWrite)
	return err
}

func (d *Device) rwSQE(op uint8, p []byte, off int64, ctl uint32) pdu.SQE {
	s := pdu.SQE{Opcode: op, Flags: pdu.PSDTSGL, NSID: d.opts.NSID, CDW12: ctl,
		SGL: pdu.SGL{ID: pdu.SGLTransport, Length: uint32(len(p))}}
	s.SetRW(uint64(off>>d.shift), uint32(len(p)>>d.shift))
	return s
}

// split runs fn over p in pieces of at most maxXfr bytes, concurrently.
func (d *Device) split(ctx context.Context, p []byte, off int64, fn func(context.Context, []byte, int64) error) error {
	var wg sync.WaitGroup
	errs := make([]error, (len(p)+d.maxXfr-1)/d.maxXfr)
	for i := range errs {
		lo := i * d.maxXfr
		hi := min(lo+d.maxXfr, len(p))
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(ctx, p[lo:hi], off+int64(lo))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Flush makes every completed write durable (NVMe Flush).
func (d *Device) Flush(ctx context.Context) error {
	if d.isClosed() {
		return blockdev.Mark(errClosed, blockdev.ErrUnavailable)
	}
	r := request{op: "flush", sqe: pdu.SQE{Opcode: pdu.IOFlush, Flags: pdu.PSDTSGL, NSID: d.opts.NSID,
		SGL: pdu.SGL{ID: pdu.SGLTransport}}}
	_, err := d.exec(ctx, &r, kindOther)
	return err
}

// WriteZeroes zeroes [off, off+n) with Write Zeroes commands, or with
// ordinary writes when the controller lacks the command.
func (d *Device) WriteZeroes(ctx context.Context, off, n int64) error {
	if err := d.check(off, n); err != nil {
		return err
	}
	if !d.caps.writeZeroes {
		return d.writeZeroBuffers(ctx, off, n)
	}
	return d.writeZeroesCmd(ctx, off, n, 0)
}

func (d *Device) writeZeroesCmd(ctx context.Context, off, n int64, ctl uint32) error {
	for n > 0 {
		blocks := min(n>>d.shift, maxWZBlocks)
		s := pdu.SQE{Opcode: pdu.IOWriteZeroes, Flags: pdu.PSDTSGL, NSID: d.opts.NSID, CDW12: ctl,
			SGL: pdu.SGL{ID: pdu.SGLTransport}}
		s.SetRW(uint64(off>>d.shift), uint32(blocks))
		r := request{op: "write zeroes", sqe: s}
		if _, err := d.exec(ctx, &r, kindOther); err != nil {
			return err
		}
		off += blocks << d.shift
		n -= blocks << d.shift
	}
	return nil
}

func (d *Device) writeZeroBuffers(ctx context.Context, off, n int64) error {
	zeros := make([]byte, min(n, 1<<20))
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if err := d.WriteAt(ctx, zeros[:k], off); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

// Trim deallocates [off, off+n) and guarantees it reads back as zeros:
// Dataset Management with the deallocate attribute when the namespace
// reads deallocated blocks as zeros (DLFEAT), else Write Zeroes with
// DEAC, else ordinary zero writes.
func (d *Device) Trim(ctx context.Context, off, n int64) error {
	if err := d.check(off, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	switch {
	case d.caps.dsm && d.ns.dlfeat&7 == 1:
		return d.deallocate(ctx, off, n)
	case d.caps.writeZeroes:
		var ctl uint32
		if d.ns.dlfeat&pdu.DLFEATWZDeac != 0 {
			ctl = pdu.WZDEAC
		}
		return d.writeZeroesCmd(ctx, off, n, ctl)
	}
	return d.writeZeroBuffers(ctx, off, n)
}

// deallocate sends Dataset Management (AD) commands of up to 256 ranges of
// up to 2^32-1 blocks.
func (d *Device) deallocate(ctx context.Context, off, n int64) error {
	const maxRangeBlocks = 1<<32 - 1
	for n > 0 {
		var rs []pdu.DSMRange
		for n > 0 && len(rs) < pdu.DSMMaxRanges {
			blocks := min(n>>d.shift, maxRangeBlocks)
			rs = append(rs, pdu.DSMRange{NLB: uint32(blocks), SLBA: uint64(off >> d.shift)})
			off += blocks << d.shift
			n -= blocks << d.shift
		}
		data := pdu.AppendDSMRanges(nil, rs)
		s := pdu.SQE{Opcode: pdu.IODSM, Flags: pdu.PSDTSGL, NSID: d.opts.NSID,
			CDW10: uint32(len(rs) - 1), CDW11: pdu.DSMDeallocate}
		r := request{op: "dataset management", sqe: s, data: data, dir: dirH2C}
		if _, err := d.exec(ctx, &r, kindOther); err != nil {
			return err
		}
	}
	return nil
}
