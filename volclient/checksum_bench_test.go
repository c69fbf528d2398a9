package volclient

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
)

// BenchmarkChecksumDataPath is volume's BenchmarkVolume checksum A/B over
// what users run: a 4+2 volume over six NVMe/TCP targets (in process,
// in-memory namespaces) behind the project's NBD server, driven by an NBD
// client with 8 requests of 1 MiB in flight, without checksums (format 1)
// and with them (format 2). Run with -count N: the two alternate. Reports
// MB/s and CPU seconds per GiB of the whole process (client, server,
// volume, initiator and targets).
func BenchmarkChecksumDataPath(b *testing.B) {
	const size = 64 << 20
	store, _, ids := benchTargets(b, 96<<20, 4<<20)
	for _, op := range []string{"write", "read"} {
		for _, csum := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/csum=%v", op, csum), func(b *testing.B) {
				client := benchNBD(b, store, ids, nil, size, csum)
				benchIO(b, client, op == "write", size)
			})
		}
	}
}

// BenchmarkScrubIdle is the scrub rate of a checksummed 4+2 volume of 256
// MiB on 8 userspace NVMe/TCP targets with in-memory namespaces, unpaced,
// with no other IO: scrub-GB/s is volume data verified per second (every
// shard read, checksums and parity checked).
func BenchmarkScrubIdle(b *testing.B) { benchScrub(b, false) }

// BenchmarkScrubUnderReads is BenchmarkScrubIdle with a foreground reader
// (1 MiB random reads) running and the scrub paced by the default Pacer,
// which the reads' latencies slow down, as the agent paces it. fg-share is
// the foreground throughput during the scrub over that of the second
// before it (the bar: 70 % or more).
func BenchmarkScrubUnderReads(b *testing.B) { benchScrub(b, true) }

func benchScrub(b *testing.B, reads bool) {
	const slot, vol = 16 << 20, 256 << 20
	var elapsed time.Duration
	var share float64
	var data int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		_, _, m, _ := benchClusterOn(b, 8, slot, vol, meta.ChecksumCRC32C, func(int) blockdev.Device {
			mem, err := blockdev.NewMem(384<<20, 4096)
			if err != nil {
				b.Fatal(err)
			}
			return mem
		})
		g := m.Volume.Geometry()
		segs := g.Segments(m.Volume.Size())
		data = segs * g.SegmentData()
		var pace func(context.Context, int64) error
		var fg *fgReads
		if reads {
			pacer, _ := moves.NewPacer(moves.PacerConfig{})
			pace = pacer.Wait
			fg = startForeground(m, pacer)
		}
		t0 := time.Now()
		b.StartTimer()
		if _, err := m.Volume.Scrub(context.Background(), 0, segs-1, pace); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		d := time.Since(t0)
		elapsed += d
		if reads {
			share += fg.share(d)
		}
		if st := m.Volume.ChecksumStats(); st.Mismatches != 0 {
			b.Fatalf("scrub of a clean volume found %+v", st)
		}
	}
	b.SetBytes(data)
	b.ReportMetric(float64(data)*float64(b.N)/elapsed.Seconds()/1e9, "scrub-GB/s")
	if reads {
		b.ReportMetric(share/float64(b.N), "fg-share")
	}
}
