package volume

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// TestParallelReusesWorkers checks that parallel runs its calls
// concurrently, returns the first error, and runs later calls on the
// goroutines of earlier ones (whose stacks have grown) instead of starting
// a goroutine per call.
func TestParallelReusesWorkers(t *testing.T) {
	var started, idle atomic.Int32
	p := &workerPool{tasks: make(chan func()),
		started: func() { started.Add(1) }, idle: func() { idle.Add(1) }}
	const n = 4
	errBoom := errors.New("boom")
	for round := 1; round <= 10; round++ {
		// Every call waits for all n to have started: they run at once.
		var all sync.WaitGroup
		all.Add(n)
		var ran [n]atomic.Int32
		err := p.parallel(n, func(i int) error {
			all.Done()
			all.Wait()
			ran[i].Add(1)
			if i == 2 {
				return errBoom
			}
			return nil
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("round %d: err %v, want %v", round, err, errBoom)
		}
		for i := range ran {
			if got := ran[i].Load(); got != 1 {
				t.Fatalf("round %d: call %d ran %d times", round, i, got)
			}
		}
		// Wait until the n-1 workers of this round wait for work again
		// (the yields let them reach their receive).
		for idle.Load() < int32(round*(n-1)) {
			runtime.Gosched()
		}
		for range 10 {
			runtime.Gosched()
		}
	}
	// One goroutine per concurrent call, reused; a worker caught between
	// announcing itself idle and its receive may cost a spare one.
	if got := started.Load(); got >= 2*(n-1) {
		t.Fatalf("%d worker goroutines started for 10 rounds of %d calls; want about %d, reused", got, n-1, n-1)
	}
}

// BenchmarkParallel compares parallel on the worker pool with a goroutine
// per call, as parallel ran before, for a stripe write's six shard calls
// that each go down a deep stack the way a shard IO does (volume, fence,
// initiator, socket: about 8 KiB of frames). Run with -count to
// interleave the two; cpu-ns/op is the process's CPU time per op.
func BenchmarkParallel(b *testing.B) {
	deep := func(int) error { descend(32); return nil }
	b.Run("goroutine-each", func(b *testing.B) {
		start := cpuTime(b)
		for b.Loop() {
			_ = goroutineEach(6, deep)
		}
		b.ReportMetric(float64((cpuTime(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
	b.Run("pool", func(b *testing.B) {
		p := newWorkerPool()
		start := cpuTime(b)
		for b.Loop() {
			_ = p.parallel(6, deep)
		}
		b.ReportMetric(float64((cpuTime(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
}

// descend recurses n frames of 256 bytes of locals each.
//
//go:noinline
func descend(n int) byte {
	var frame [256]byte
	frame[n%256] = byte(n)
	if n == 0 {
		return frame[0]
	}
	return descend(n-1) + frame[n%256]
}

// goroutineEach is parallel as it was before the worker pool.
func goroutineEach(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	errs[0] = f(0)
	wg.Wait()
	return errors.Join(errs...)
}

// TestStopEndsWorkers: after stop, idle workers exit at once. Inside a
// synctest bubble, whose clock stops when its main goroutine returns, a
// worker still waiting out workerIdle makes synctest.Test fail with a
// deadlock.
func TestStopEndsWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWorkerPool()
		if err := p.parallel(4, func(int) error { return nil }); err != nil {
			t.Fatal(err)
		}
		p.stop()
		p.stop() // twice is fine
		if err := p.parallel(2, func(int) error { return nil }); err != nil {
			t.Fatal("a stopped pool still runs calls:", err)
		}
	})
}
