package ublk

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
)

// TestCommandNumbers checks the ioctl-encoded numbers against
// include/uapi/linux/ublk_cmd.h (UBLK_U_CMD_*, UBLK_U_IO_*) and the legacy
// ones against the 6.1 header.
func TestCommandNumbers(t *testing.T) {
	for _, c := range []struct {
		nr            uint32
		ioctl, legacy uint32
	}{
		{cmdAddDev, 0xC0207504, 0x04}, {cmdDelDev, 0xC0207505, 0x05}, {cmdStartDev, 0xC0207506, 0x06},
		{cmdStopDev, 0xC0207507, 0x07}, {cmdSetParams, 0xC0207508, 0x08}, {cmdGetParams, 0x80207509, 0x09},
		{cmdGetDevInfo, 0x80207502, 0x02},
	} {
		if got := EncodingIoctl.ctrlOp(c.nr); got != c.ioctl {
			t.Errorf("%s ioctl-encoded %#x, want %#x", cmdNames[c.nr], got, c.ioctl)
		}
		if got := EncodingLegacy.ctrlOp(c.nr); got != c.legacy {
			t.Errorf("%s legacy %#x, want %#x", cmdNames[c.nr], got, c.legacy)
		}
	}
	if a, b := EncodingIoctl.ioOp(ioFetchReq), EncodingIoctl.ioOp(ioCommitAndFetch); a != 0xC0107520 || b != 0xC0107521 {
		t.Errorf("FETCH_REQ %#x COMMIT_AND_FETCH_REQ %#x, want 0xc0107520 0xc0107521", a, b)
	}
	if EncodingLegacy.ioOp(ioFetchReq) != 0x20 {
		t.Error("legacy FETCH_REQ is not 0x20")
	}
}

// TestLayouts checks field offsets of the encoded structures against the C
// layouts of ublk_cmd.h.
func TestLayouts(t *testing.T) {
	c := ctrlCmd{DevID: 0x01020304, QueueID: 0xffff, Len: 64, Addr: 0x1122334455667788, Data0: 42}.encode()
	if len(c) != 32 || le.Uint32(c[0:]) != 0x01020304 || le.Uint16(c[4:]) != 0xffff || le.Uint16(c[6:]) != 64 ||
		le.Uint64(c[8:]) != 0x1122334455667788 || le.Uint64(c[16:]) != 42 {
		t.Errorf("ublksrv_ctrl_cmd % x", c)
	}
	info := DevInfo{Queues: 2, Depth: 64, State: 1, MaxIOBytes: 512 << 10, ID: 7, ServerPID: 99, Flags: 1 << 6}
	b := make([]byte, devInfoSize)
	info.encode(b)
	if le.Uint16(b[2:]) != 64 || le.Uint32(b[8:]) != 512<<10 || le.Uint32(b[12:]) != 7 || le.Uint32(b[16:]) != 99 || le.Uint64(b[24:]) != 1<<6 {
		t.Errorf("ublksrv_ctrl_dev_info % x", b)
	}
	if got := decodeDevInfo(b); got != info {
		t.Errorf("dev info round trip: %+v, want %+v", got, info)
	}
	io := make([]byte, ioCmdSize)
	encodeIOCmd(io, 3, 17, -5, 0xabcdef)
	if le.Uint16(io[0:]) != 3 || le.Uint16(io[2:]) != 17 || int32(le.Uint32(io[4:])) != -5 || le.Uint64(io[8:]) != 0xabcdef {
		t.Errorf("ublksrv_io_cmd % x", io)
	}
	d := make([]byte, ioDescSize)
	le.PutUint32(d[0:], opWrite|ioFlagFUA)
	le.PutUint32(d[4:], 8)
	le.PutUint64(d[8:], 1000)
	if r := decodeDesc(d); r != (request{op: opWrite, flags: ioFlagFUA, sectors: 8, start: 1000}) {
		t.Errorf("ublksrv_io_desc decoded %+v", r)
	}
	p := params{attrs: attrVolatileCache, logicalShift: 9, physicalShift: 12, ioOptShift: 16, ioMinShift: 9,
		maxSectors: 1024, devSectors: 1 << 20, discardGranularity: 4096, maxDiscard: 5, maxWriteZeroes: 6}.encode()
	if le.Uint32(p[0:]) != 64 || le.Uint32(p[4:]) != 3 || le.Uint32(p[8:]) != attrVolatileCache ||
		!bytes.Equal(p[12:16], []byte{9, 12, 16, 9}) || le.Uint32(p[16:]) != 1024 || le.Uint64(p[24:]) != 1<<20 ||
		le.Uint32(p[44:]) != 4096 || le.Uint32(p[48:]) != 5 || le.Uint32(p[52:]) != 6 || le.Uint16(p[56:]) != 1 {
		t.Errorf("ublk_params % x", p)
	}
}

func TestParamsFor(t *testing.T) {
	mem, _ := blockdev.NewMem(64<<20, 4096)
	p, err := paramsFor(devtest.OptimalIO{Device: mem, Optimal: 256 << 10}, 512<<10, true)
	if err != nil {
		t.Fatal(err)
	}
	if p.logicalShift != 12 || p.physicalShift != 12 || p.ioOptShift != 18 || p.maxSectors != 1024 ||
		p.devSectors != 64<<11 || p.discardGranularity != 4096 || p.attrs != attrVolatileCache|attrFUA|attrReadOnly {
		t.Errorf("params of a 64 MiB 4K device with 256K optimal IO, read-only: %+v", p)
	}
	mem512, _ := blockdev.NewMem(1<<20, 512)
	if p, _ := paramsFor(mem512, 128<<10, false); p.logicalShift != 9 || p.ioOptShift != 9 || p.attrs&attrReadOnly != 0 {
		t.Errorf("params of a 512-byte device: %+v", p)
	}
	if _, err := paramsFor(oddBlock{mem512}, 128<<10, false); !errors.Is(err, ErrBadOptions) {
		t.Errorf("block size 1536: %v, want ErrBadOptions", err)
	}
}

type oddBlock struct{ blockdev.Device }

func (oddBlock) BlockSize() int { return 1536 }

func TestOptionsValidate(t *testing.T) {
	if o := (*Options)(nil).withDefaults(16); o.Queues != 4 || o.Depth != 64 || o.MaxIO != 512<<10 || o.validate() != nil {
		t.Errorf("defaults on 16 CPUs: %+v", o)
	}
	for _, o := range []Options{{Queues: 65, Depth: 1, MaxIO: 4096}, {Queues: 1, Depth: 4097, MaxIO: 4096}, {Queues: 1, Depth: 1, MaxIO: 1000}} {
		if err := o.validate(); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%+v: %v, want ErrBadOptions", o, err)
		}
	}
}

func req(op uint8, flags uint32, off, n int64) request {
	return request{op: op, flags: flags, start: uint64(off >> 9), sectors: uint32(n >> 9)}
}

// TestServeOps runs each operation the driver sends against a Mem device
// through faultdev, which counts the calls it receives.
func TestServeOps(t *testing.T) {
	ctx := context.Background()
	mem, _ := blockdev.NewMem(1<<20, 4096)
	dev := faultdev.New(mem, 1)
	buf := make([]byte, 64<<10)
	copy(buf, bytes.Repeat([]byte("ublk"), 4096))
	if res := serve(ctx, dev, req(opWrite, 0, 8192, 16384), buf, false); res != 16384 {
		t.Fatalf("WRITE res %d", res)
	}
	got := make([]byte, 64<<10)
	if res := serve(ctx, dev, req(opRead, 0, 8192, 16384), got, false); res != 16384 || !bytes.Equal(got[:16384], buf[:16384]) {
		t.Fatalf("READ res %d, data equal %v", res, bytes.Equal(got[:16384], buf[:16384]))
	}
	serve(ctx, dev, req(opWrite, ioFlagFUA, 0, 4096), buf, false)
	serve(ctx, dev, req(opFlush, 0, 0, 0), nil, false)
	serve(ctx, dev, req(opDiscard, ioFlagFUA, 8192, 4096), nil, false)
	serve(ctx, dev, req(opWriteZeroes, ioFlagNoUnmap, 12288, 4096), nil, false)
	serve(ctx, dev, req(opWriteZeroes, 0, 16384, 4096), nil, false)
	s := dev.Stats()
	want := faultdev.Stats{Reads: 1, Writes: 2, FUAWrites: 1, Flushes: 2, WriteZeroes: 1, Trims: 2, ReadBytes: 16384, WriteBytes: 16384 + 4096}
	if s != want {
		t.Fatalf("device calls %+v, want %+v", s, want)
	}
	if res := serve(ctx, dev, req(opRead, 0, 8192, 16384), got, false); res != 16384 || !bytes.Equal(got[:12288], make([]byte, 12288)) || !bytes.Equal(got[12288:16384], buf[12288:16384]) {
		t.Fatalf("after discard and write-zeroes: res %d, first 12K zero %v, last 4K kept %v", res,
			bytes.Equal(got[:12288], make([]byte, 12288)), bytes.Equal(got[12288:16384], buf[12288:16384]))
	}
}

func TestServeErrors(t *testing.T) {
	ctx := context.Background()
	mem, _ := blockdev.NewMem(1<<20, 4096)
	dev := faultdev.New(mem, 1)
	buf := make([]byte, 8192)
	cases := []struct {
		name     string
		rule     *faultdev.Rule
		r        request
		readOnly bool
		want     syscall.Errno
	}{
		{"fenced write", &faultdev.Rule{Ops: faultdev.OpWrite, Err: blockdev.ErrFenced}, req(opWrite, 0, 0, 4096), false, syscall.EPERM},
		{"write out of space", &faultdev.Rule{Ops: faultdev.OpWrite, Err: blockdev.ErrNoSpace}, req(opWrite, 0, 0, 4096), false, syscall.ENOSPC},
		{"unavailable read", &faultdev.Rule{Ops: faultdev.OpRead}, req(opRead, 0, 0, 4096), false, syscall.EIO},
		{"corrupt read", &faultdev.Rule{Ops: faultdev.OpRead, Err: blockdev.ErrCorrupt}, req(opRead, 0, 0, 4096), false, syscall.EIO},
		{"failed flush", &faultdev.Rule{Ops: faultdev.OpFlush}, req(opFlush, 0, 0, 0), false, syscall.EIO},
		{"read past the end", nil, req(opRead, 0, 1<<20, 4096), false, syscall.EINVAL},
		{"read larger than the buffer", nil, req(opRead, 0, 0, 16384), false, syscall.EINVAL},
		{"write to read-only", nil, req(opWrite, 0, 0, 4096), true, syscall.EPERM},
		{"discard on read-only", nil, req(opDiscard, 0, 0, 4096), true, syscall.EPERM},
		{"unknown op", nil, req(4, 0, 0, 4096), false, syscall.EOPNOTSUPP},
	}
	for _, c := range cases {
		dev.Clear()
		if c.rule != nil {
			dev.Add(*c.rule)
		}
		if res := serve(ctx, dev, c.r, buf, c.readOnly); res != -int32(c.want) {
			t.Errorf("%s: res %d, want -%d (%v)", c.name, res, int32(c.want), c.want)
		}
	}
}
