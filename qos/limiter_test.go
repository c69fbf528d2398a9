package qos

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
)

// waits runs n requests of dir and size one after the other and returns
// how long they took on the bubble's clock.
func waits(t *testing.T, l *Limiter, n int, dir Dir, size int64) time.Duration {
	t.Helper()
	start := time.Now()
	for range n {
		if _, err := l.Wait(t.Context(), dir, size); err != nil {
			t.Fatal(err)
		}
	}
	return time.Since(start)
}

// near says whether got is want, give or take the nanosecond that turning
// float seconds into whole nanoseconds (rounded up) may add.
func near(got, want time.Duration) bool { return got >= want && got <= want+time.Nanosecond }

// TestLimiterWaits: on the fake clock of testing/synctest, requests go at
// exactly the rate after the burst; a limit of one direction leaves the
// other alone; a request larger than the byte burst is not refused but
// waits as long as its size needs.
func TestLimiterWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(Limits{IOPS: 10, Burst: 100 * time.Millisecond}) // holds 1 request
		if got := waits(t, l, 21, Read, 4096); got != 2*time.Second {
			t.Fatalf("21 requests at 10/s with a burst of 1: %v, want 2s", got)
		}
		l.Set(Limits{ReadIOPS: 10, Burst: 100 * time.Millisecond})
		if got := waits(t, l, 1000, Write, 4096); got != 0 {
			t.Fatalf("writes under a read limit waited %v", got)
		}
		if got := waits(t, l, 11, Read, 4096); got != time.Second {
			t.Fatalf("11 reads at 10/s: %v, want 1s", got)
		}
		l.Set(Limits{BPS: 4096}) // burst 1s: 4096 bytes
		if got := waits(t, l, 1, Write, 16384); got != 3*time.Second {
			t.Fatalf("16 KiB at 4 KiB/s with 4 KiB in the bucket: waited %v, want 3s", got)
		}
		if got := waits(t, l, 1, Write, 0); got != 0 {
			t.Fatalf("a request of no bytes under a byte limit waited %v", got)
		}
		if got := waits(t, l, 1, Read, 4096); got != time.Second {
			t.Fatalf("4 KiB at 4 KiB/s with the bucket empty: %v, want 1s", got)
		}
	})
}

// TestLimiterChange: a change of limits reaches a request already waiting
// (raised: it goes at the new rate; removed: it goes at once), and a
// request whose context ends gives its tokens back.
func TestLimiterChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(Limits{IOPS: 1})
		waits(t, l, 1, Read, 0) // the burst
		done := make(chan time.Duration)
		go func() { done <- waits(t, l, 1, Read, 0) }() // 1s at 1/s
		time.Sleep(100 * time.Millisecond)
		l.Set(Limits{IOPS: 1000}) // 0.1 filled, 0.9 owed at 1000/s
		if got := <-done; !near(got, 100*time.Millisecond+900*time.Microsecond) {
			t.Fatalf("raised while waiting: went after %v, want 100.9ms", got)
		}
		l.Set(Limits{IOPS: 1, Burst: time.Millisecond})
		waits(t, l, 1, Read, 0)
		go func() { done <- waits(t, l, 1, Read, 0) }()
		time.Sleep(200 * time.Millisecond)
		l.Set(Limits{})
		if got := <-done; got != 200*time.Millisecond || l.Limited() {
			t.Fatalf("limit removed while waiting: went after %v (limited %v), want 200ms", got, l.Limited())
		}

		l.Set(Limits{IOPS: 1, Burst: time.Millisecond})
		waits(t, l, 1, Read, 0)
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		w, err := l.Wait(ctx, Read, 0)
		if !errors.Is(err, context.DeadlineExceeded) || w != 300*time.Millisecond {
			t.Fatalf("context ended while waiting: %v after %v, want DeadlineExceeded after 300ms", err, w)
		}
		// Its token is back: the next request goes when the first owed
		// one is filled, 1s after the start, 700ms from now.
		if got := waits(t, l, 1, Read, 0); !near(got, 700*time.Millisecond) {
			t.Fatalf("after a request gave its token back: waited %v, want 700ms", got)
		}
	})
}

// TestDevice: the limited device passes every capability through (but
// Synchronous while limited), lets only read and write requests through
// at the rate, counts trims as writes, does not limit flushes, and tells
// who waited and how long.
func TestDevice(t *testing.T) {
	devtest.PassesCapabilities(t, func(d blockdev.Device) blockdev.Device { return NewDevice(d, NewLimiter(Limits{}), nil) }, true)
	devtest.PassesCapabilities(t, func(d blockdev.Device) blockdev.Device {
		return NewDevice(d, NewLimiter(Limits{IOPS: 1 << 30}), nil)
	}, false)
	synctest.Test(t, func(t *testing.T) {
		mem, err := blockdev.NewMem(1<<20, 4096)
		if err != nil {
			t.Fatal(err)
		}
		var waited [blockdev.NumOps]time.Duration
		d := NewDevice(mem, NewLimiter(Limits{WriteIOPS: 10, Burst: 100 * time.Millisecond}), func(op blockdev.Op, w time.Duration) { waited[op] += w })
		ctx, p := t.Context(), make([]byte, 4096)
		start := time.Now()
		for range 3 {
			if err := d.WriteAt(ctx, p, 0); err != nil {
				t.Fatal(err)
			}
			if err := d.ReadAt(ctx, p, 0); err != nil {
				t.Fatal(err)
			}
			if err := d.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Trim(ctx, 0, 4096); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 300*time.Millisecond {
			t.Fatalf("3 writes and a trim at 10/s: %v, want 300ms", got)
		}
		if waited[blockdev.OpWrite] != 200*time.Millisecond || waited[blockdev.OpTrim] != 100*time.Millisecond || waited[blockdev.OpRead] != 0 {
			t.Fatalf("waits told: %v", waited)
		}
	})
}
