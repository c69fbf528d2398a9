package initiator

import (
	"context"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/cputime"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// BenchmarkConnectAuth measures what DH-HMAC-CHAP adds to connecting:
// each op opens a device of two queues (admin and one I/O queue, each
// authenticated on its own) on the real target over 127.0.0.1 and closes
// it; "none" is the same without keys. Host and target run in this
// process, so the cost is both sides'. ms/queue is the op's wall time per
// queue, cpu-ms/queue its CPU time (host and target; steadier than wall
// time on a busy machine); subtract none's to get DH-HMAC-CHAP's.
//
//	go test -run XXX -bench ConnectAuth -benchtime 20x ./nvmeof/initiator/
func BenchmarkConnectAuth(b *testing.B) {
	type combo struct {
		hash, group string
		bidi        bool
	}
	combos := []combo{{"", "", false}, {"sha256", "null", false}, {"sha512", "null", false}, {"sha256", "null", true}}
	for _, g := range []string{"ffdhe2048", "ffdhe3072", "ffdhe4096", "ffdhe6144", "ffdhe8192"} {
		combos = append(combos, combo{"sha256", g, false})
	}
	combos = append(combos, combo{"sha512", "ffdhe2048", true})
	for _, c := range combos {
		name := "none"
		if c.hash != "" {
			name = c.hash + "/" + c.group
			if c.bidi {
				name += "/bidi"
			}
		}
		b.Run(name, func(b *testing.B) { benchConnect(b, c.hash, c.group, c.bidi) })
	}
}

func benchConnect(b *testing.B, hash, group string, bidi bool) {
	var hk, ck string
	mut := func(*target.Config) {}
	if hash != "" {
		hk = secret(b, 1)
		if bidi {
			ck = secret(b, 3)
		}
		mut = func(c *target.Config) {
			c.Subsystems[0].AllowedHosts = nil
			c.Subsystems[0].HostKeys = []target.HostKey{{HostNQN: testHost, Secret: hk, CtrlSecret: ck,
				Hashes: []string{hash}, DHGroups: []string{group}}}
		}
	}
	f := newFixture(b, 1, 1<<20, mut)
	o := f.options(b)
	o.Logf, o.IOQueues, o.DHCHAPSecret, o.DHCHAPCtrlSecret = nil, 1, hk, ck
	o.ConnectTimeout = 30 * time.Second // ffdhe8192 takes long on a loaded machine
	const queues = 2
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for range b.N {
		d, err := Open(context.Background(), o)
		if err != nil {
			b.Fatal(err)
		}
		d.Close()
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N*queues), "ms/queue")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N*queues), "cpu-ms/queue")
}

// cpuTime is the CPU time (user and system) this process has used.
var cpuTime = cputime.Self
