package initiator

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// BenchmarkNVMeTCP measures the initiator against the real target on
// 127.0.0.1 serving an in-memory namespace. Compare with
// BenchmarkLoopbackTCP: 128 KiB at QD32 should reach half of the raw
// 128KiB stream, and a 4 KiB QD1 read should take at most twice the raw
// ping-pong.
//
//	go test -run XXX -bench 'NVMeTCP|LoopbackTCP' ./nvmeof/initiator/
func BenchmarkNVMeTCP(b *testing.B) { benchNVMeTCP(b, false) }

// BenchmarkNVMeTCPReserved is BenchmarkNVMeTCP with the device registered
// and a write-exclusive all-registrants reservation held, as an owner's
// devices run: every command takes the reservation check's slow path.
func BenchmarkNVMeTCPReserved(b *testing.B) { benchNVMeTCP(b, true) }

func benchNVMeTCP(b *testing.B, reserved bool) {
	const size = 64 << 20
	f := newFixture(b, 1, size, nil)
	o := f.options(b)
	o.Logf = nil
	d := open(b, o)
	ctx := context.Background()
	if reserved {
		if err := d.TakeOver(ctx, 1, 0); err != nil {
			b.Fatal(err)
		}
	}
	// Allocate the whole namespace once so reads do real copies and writes
	// do not pay for first allocation.
	fill := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(fill)) {
		if err := d.WriteAt(ctx, fill, off); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("read-128KiB-qd32", func(b *testing.B) { benchQD(b, d, 128<<10, 32, false) })
	b.Run("write-128KiB-qd32", func(b *testing.B) { benchQD(b, d, 128<<10, 32, true) })
	b.Run("read-4KiB-qd1", func(b *testing.B) { benchQD(b, d, 4096, 1, false) })
}

// benchQD keeps qd requests of n bytes in flight from qd goroutines.
func benchQD(b *testing.B, d *Device, n, qd int, write bool) {
	b.SetBytes(int64(n))
	slots := d.Size() / int64(n)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for g := 0; g < qd; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, n)
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				off := (i * 7919 % slots) * int64(n)
				var err error
				if write {
					err = d.WriteAt(context.Background(), p, off)
				} else {
					err = d.ReadAt(context.Background(), p, off)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkTakeOver measures a fencing handover on loopback: the new
// session's TakeOver (register, acquire, preempt-and-abort) until the old
// session's next write is refused. Two sessions alternate with rising
// keys. "persisted" keeps the reservations in a file (fsync per change),
// as `target serve` does.
//
//	go test -run XXX -bench TakeOver ./nvmeof/initiator/
func BenchmarkTakeOver(b *testing.B) {
	b.Run("memory", func(b *testing.B) { benchTakeOver(b, "") })
	b.Run("persisted", func(b *testing.B) { benchTakeOver(b, filepath.Join(b.TempDir(), "ns1.resv")) })
}

func benchTakeOver(b *testing.B, file string) {
	f := newFixture(b, 1, 1<<20, func(c *target.Config) { c.Subsystems[0].Namespaces[0].ReservationFile = file })
	ctx := context.Background()
	devs := [2]*Device{}
	for i := range devs {
		o := f.options(b)
		o.Logf, o.IOQueues, o.HostID = nil, 1, [16]byte{0: 0xB0, 15: byte(i + 1)}
		devs[i] = open(b, o)
	}
	if err := devs[0].TakeOver(ctx, 1, 0); err != nil {
		b.Fatal(err)
	}
	p := make([]byte, 4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key := uint64(i + 2)
		newer, older := devs[(i+1)%2], devs[i%2]
		if err := newer.TakeOver(ctx, key, key-1); err != nil {
			b.Fatal(err)
		}
		if err := older.WriteAt(ctx, p, 0); !errors.Is(err, blockdev.ErrFenced) {
			b.Fatalf("old session's write: %v", err)
		}
	}
}
