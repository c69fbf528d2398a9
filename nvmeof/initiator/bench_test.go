package initiator

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
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
