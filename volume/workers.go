package volume

import (
	"sync"
	"time"
)

// workerIdle is how long a worker goroutine waits for its next task before
// it exits.
const workerIdle = 2 * time.Second

// workerPool runs the calls of its parallel on goroutines that outlive
// one call. A fresh goroutine starts with a small stack and grows it,
// copying it each time, on the way down a shard IO (volume, fence,
// initiator, socket); a worker that ran a task before has its stack grown
// already. Workers that find no task for workerIdle exit, so an idle
// process keeps none. Each Volume has its own pool, so that the workers
// of a volume opened inside a testing/synctest bubble wait on a channel of
// that bubble.
type workerPool struct {
	tasks    chan func() // unbuffered: a send succeeds only to an idle worker
	quit     chan struct{}
	stopOnce sync.Once
	// started and idle, when set, are called when a worker goroutine
	// starts and each time one waits for a task (tests).
	started, idle func()
}

func newWorkerPool() *workerPool {
	return &workerPool{tasks: make(chan func()), quit: make(chan struct{})}
}

// stop makes idle workers exit now and busy ones once their task ends,
// instead of after workerIdle (a closed volume keeps no goroutines; a
// testing/synctest bubble, whose clock stops with its main goroutine,
// can end). run still works after stop: its worker exits after one task.
func (p *workerPool) stop() { p.stopOnce.Do(func() { close(p.quit) }) }

// run runs f on an idle worker, or on a new one when none is idle. It never
// waits for a worker to become free.
func (p *workerPool) run(f func()) {
	select {
	case p.tasks <- f:
	default:
		if p.started != nil {
			p.started()
		}
		go p.work(f)
	}
}

// work runs f, then the tasks it is handed, until none comes for workerIdle.
func (p *workerPool) work(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		f = nil // nothing of the finished task stays reachable while idle
		idle.Reset(workerIdle)
		if p.idle != nil {
			p.idle()
		}
		select {
		case f = <-p.tasks:
		case <-idle.C:
			return
		case <-p.quit:
			return
		}
	}
}

// parallel runs f(0..n-1) concurrently (f(0) on the calling goroutine, the
// others on workers) and returns the first error.
func (p *workerPool) parallel(n int, f func(i int) error) error {
	if n == 0 {
		return nil
	}
	if n == 1 {
		return f(0)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	wg.Add(n - 1)
	for i := 1; i < n; i++ {
		p.run(func() {
			defer wg.Done()
			errs[i] = f(i)
		})
	}
	errs[0] = f(0)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
