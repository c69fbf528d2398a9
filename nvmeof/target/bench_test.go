package target

import (
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// BenchmarkTarget measures the target alone against a minimal pipelined
// host on 127.0.0.1 (in-memory namespace). The end-to-end numbers with the
// real initiator are BenchmarkNVMeTCP in nvmeof/initiator.
func BenchmarkTarget(b *testing.B) {
	for _, bc := range benchShapes {
		b.Run(bc.name, func(b *testing.B) {
			f := newFixture(b, 1, nil)
			a := dial(b, f.t.Addr(0), pdu.Digests{})
			cntlid := a.adminUp(0)
			io := ioUp(b, f.t.Addr(0), pdu.Digests{}, 1, cntlid, 0)
			b.SetBytes(int64(bc.nlb) * nsBS)
			b.ResetTimer()
			benchLoop(b, io, bc.op, bc.nlb, bc.depth)
		})
	}
}

// benchShapes are the IO shapes BenchmarkTarget and BenchmarkTargetCPU
// run: commands of nlb blocks with depth in flight.
var benchShapes = []struct {
	name  string
	op    uint8
	nlb   uint32
	depth int
}{
	{"write-128KiB-qd32", pdu.IOWrite, 32, 32},
	{"read-128KiB-qd32", pdu.IORead, 32, 32},
	{"write-4KiB-qd1", pdu.IOWrite, 1, 1},
	{"read-4KiB-qd1", pdu.IORead, 1, 1},
}

// victimReads is the victim of the neighbour benchmarks: b.N reads of
// one block at QD1 on namespace 1 (size bytes) of the target at addr,
// through a controller of its own; it reports their p50 and p99 in µs.
func victimReads(b *testing.B, addr string, size int) {
	a := dial(b, addr, pdu.Digests{})
	v := ioUp(b, addr, pdu.Digests{}, 1, a.adminUp(0), 0)
	lat := make([]time.Duration, 0, b.N)
	in := make([]byte, nsBS)
	b.ResetTimer()
	for i := range b.N {
		s := rwSQE(pdu.IORead, 1, uint64(size/nsBS-1-i%64), 1, false)
		t0 := time.Now()
		mustOK(b, "victim read", v.do(s, nil, in))
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func benchLoop(b *testing.B, h *host, op uint8, nlb uint32, depth int) {
	benchLoopSized(b, h, op, nlb, depth, nsSize, 16384, b.N)
}

// benchLoopSized runs n commands of nlb blocks on namespace 1 (size bytes)
// with depth in flight, walking the namespace in order; writes of up to
// inCap bytes go in the capsule, as the initiator sends them. Like the
// initiator it writes from one goroutine (writev, data not copied) and
// reads from another.
func benchLoopSized(b *testing.B, h *host, op uint8, nlb uint32, depth, size, inCap, n int) {
	data := make([]byte, nlb*nsBS)
	inCapsule := op == pdu.IOWrite && len(data) <= inCap && !h.dg.Data
	out := make(chan net.Buffers, 2*depth)
	werr := make(chan error, 1)
	go func() {
		var err error
		for bufs := range out {
			if err == nil {
				_, err = bufs.WriteTo(h.nc)
			}
		}
		werr <- err
	}()
	submit := func(i int) {
		s := rwSQE(op, 1, uint64(i%(size/nsBS/int(nlb)))*uint64(nlb), nlb, inCapsule)
		s.CID, s.Flags = uint16(i%depth), pdu.PSDTSGL
		if inCapsule {
			out <- net.Buffers{pdu.AppendCapsuleCmdHdr(nil, &s, len(data), h.dg), data}
		} else {
			out <- net.Buffers{pdu.AppendCapsuleCmd(nil, &s, nil, h.dg)}
		}
	}
	defer func() {
		close(out)
		if err := <-werr; err != nil {
			b.Fatal(err)
		}
	}()
	sent, done := 0, 0
	for ; sent < depth && sent < n; sent++ {
		submit(sent)
	}
	var buf []byte
	for done < n {
		p, nb, err := pdu.ReadPDU(h.br, buf, -1, h.dg)
		buf = nb
		if err != nil {
			b.Fatal(err)
		}
		switch p.Header.Type {
		case pdu.TypeR2T:
			r := pdu.ParseR2T(p.Hdr)
			hdr := pdu.AppendDataHdr(nil, pdu.TypeH2CData, pdu.FlagLastPDU,
				pdu.DataHdr{CCCID: r.CCCID, TTAG: r.TTAG, DataO: r.R2TO, DataL: r.R2TL}, h.dg)
			out <- net.Buffers{hdr, data[r.R2TO : r.R2TO+r.R2TL]}
			continue
		case pdu.TypeC2HData:
			if p.Header.Flags&pdu.FlagSuccess == 0 {
				continue
			}
		case pdu.TypeCapsuleResp:
			if c := pdu.ParseCapsuleResp(p.Hdr); !c.Status.Success() {
				b.Fatalf("status %v", c.Status)
			}
		}
		done++
		if sent < n {
			submit(sent)
			sent++
		}
	}
}

// BenchmarkLoopbackPingPong is the raw floor for read-4KiB-qd1: a 72-byte
// request answered by 4 KiB + 24 bytes over a plain TCP pair.
func BenchmarkLoopbackPingPong(b *testing.B) {
	c, server := testutil.TCPPair(b)
	go func() {
		req, resp := make([]byte, 72), make([]byte, 4096+48)
		for {
			if _, err := io.ReadFull(server, req); err != nil {
				return
			}
			if _, err := server.Write(resp); err != nil {
				return
			}
		}
	}()
	req, resp := make([]byte, 72), make([]byte, 4096+48)
	b.SetBytes(4096)
	for i := 0; i < b.N; i++ {
		c.Write(req)
		if _, err := io.ReadFull(c, resp); err != nil {
			b.Fatal(err)
		}
	}
}
