package initiator

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// TestConnectionLostDuringR2THandOff cuts the connection just after the
// reader queued the data an R2T asks for and took the writing role, before
// it hands the role to the writer goroutine. The writer, seeing the queue
// dead, may exit first: the reader must then give the role up itself, so
// that the command fails over to a new connection and the write lands,
// instead of every goroutine of the queue waiting forever for a writer
// that is gone.
func TestConnectionLostDuringR2THandOff(t *testing.T) {
	f := newFixture(t, 1, 4<<20, func(c *target.Config) { c.InCapsuleDataSize = 4096 })
	o := f.options(t)
	o.IOQueues = 1
	d := open(t, o)
	q := d.paths[0].ctrl.Load().ios[0]
	q.beforeHandOff = func() {
		q.fail(errors.New("connection cut by the test"))
		// Let the writer goroutine see the queue dead before the hand-off.
		for range 100 {
			runtime.Gosched()
		}
		time.Sleep(50 * time.Millisecond)
	}
	p := make([]byte, 64<<10) // past the in-capsule limit: R2T
	stamp(p, 0, 7)
	done := make(chan error, 1)
	go func() { done <- d.WriteAt(context.Background(), p, 0) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("write on a connection cut mid hand-off: %v", err)
		}
		got := make([]byte, len(p))
		if err := f.mem.ReadAt(context.Background(), got, 0); err != nil || !bytes.Equal(got, p) {
			t.Fatalf("write retried on a new connection did not land (err %v)", err)
		}
	case <-time.After(time.Minute):
		buf := make([]byte, 1<<20)
		t.Fatalf("write hung after the connection was cut mid hand-off:\n%s", buf[:runtime.Stack(buf, true)])
	}
}
