package initiator

import (
	"context"
	"syscall"
	"testing"

	"github.com/nvstripe/nvstripe/nvmeof/target"
	"github.com/nvstripe/nvstripe/nvmeof/tlspsk"
)

// BenchmarkNVMeTCPTLS is BenchmarkNVMeTCP in plaintext and over TLS with
// each cipher suite, reporting the process's CPU time (initiator and
// target together, getrusage) per GiB moved. Run it with -count so the
// modes interleave:
//
//	go test -run XXX -bench NVMeTCPTLS -count 5 ./nvmeof/initiator/
func BenchmarkNVMeTCPTLS(b *testing.B) {
	for _, mode := range []struct {
		name string
		hash uint8
	}{{"plain", 0}, {"aes128", tlspsk.HashSHA256}, {"aes256", tlspsk.HashSHA384}} {
		b.Run(mode.name, func(b *testing.B) {
			const size = 64 << 20
			var k tlspsk.Key
			f := newFixture(b, 1, size, func(c *target.Config) {
				if mode.hash != 0 {
					k = tlsKey(b, mode.hash)
					c.TLS, c.TLSKeys = target.TLSRequire, map[string]tlspsk.Key{testHost: k}
				}
			})
			o := f.options(b)
			o.Logf = nil
			if mode.hash != 0 {
				o.TLSKey = k.String()
			}
			d := open(b, o)
			fill := make([]byte, 1<<20)
			for off := int64(0); off < size; off += int64(len(fill)) {
				if err := d.WriteAt(context.Background(), fill, off); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("read-128KiB-qd32", func(b *testing.B) { cpuPerGiB(b, 128<<10, func() { benchQD(b, d, 128<<10, 32, false) }) })
			b.Run("write-128KiB-qd32", func(b *testing.B) { cpuPerGiB(b, 128<<10, func() { benchQD(b, d, 128<<10, 32, true) }) })
			b.Run("read-4KiB-qd1", func(b *testing.B) { cpuPerGiB(b, 4096, func() { benchQD(b, d, 4096, 1, false) }) })
		})
	}
}

// cpuPerGiB runs bench (b.N operations of size bytes) and reports the
// process's CPU seconds per GiB.
func cpuPerGiB(b *testing.B, size int, bench func()) {
	before := cpuSeconds()
	bench()
	b.StopTimer()
	b.ReportMetric((cpuSeconds()-before)/(float64(b.N)*float64(size))*(1<<30), "cpu-s/GiB")
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
