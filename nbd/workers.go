package nbd

import (
	"net"
	"sync"

	"github.com/nvstripe/nvstripe/nbd/proto"
)

// job is one request handed from the reader to a worker.
type job struct {
	req     proto.Request
	payload *[]byte // WRITE data
	cost    int
}

// dispatch hands j to an idle worker, or starts one. Workers live until the
// connection ends, so a connection keeps at most as many as it ever had
// requests in flight (Options.MaxInFlight), and their stacks stay grown.
func (c *conn) dispatch(j job) {
	select {
	case c.jobs <- j:
	default:
		go c.work(j)
	}
}

// work runs j, then the jobs it is handed, until the connection ends.
func (c *conn) work(j job) {
	for ok := true; ok; j, ok = <-c.jobs {
		c.handle(j)
	}
}

// handle runs one request and sends its reply.
func (c *conn) handle(j job) {
	defer c.workers.Done()
	r := c.newReply(j.req, j.cost)
	r.payload = j.payload
	if err := c.exec(r); err != nil {
		c.fail(r, err)
	}
	c.send(r)
}

// sender serialises the socket's write side. There is no writer goroutine:
// the worker that finds the sender idle becomes the writer and sends its own
// reply at once, while its READ data is still in this CPU's cache, then
// whatever replies others queued meanwhile, gathered into one writev, until
// the queue is empty.
type sender struct {
	mu     sync.Mutex
	busy   bool     // REQUIRES: mu held
	failed bool     // a write failed: replies are dropped; REQUIRES: mu held
	queue  []*reply // REQUIRES: mu held
	spare  []*reply // the previous batch's backing array, reused
	vec    net.Buffers
}

// send queues r and, unless another worker is writing, writes the queue.
// After a write error it closes the socket (so the reader stops) and drops
// the replies that follow; every reply is released either way.
func (c *conn) send(r *reply) {
	t := &c.tx
	t.mu.Lock()
	t.queue = append(t.queue, r)
	if t.busy {
		t.mu.Unlock()
		return
	}
	t.busy = true
	for len(t.queue) > 0 {
		batch, failed := t.queue, t.failed
		t.queue = t.spare[:0]
		t.mu.Unlock()
		err := c.writeBatch(batch, failed)
		t.mu.Lock()
		t.failed = t.failed || err != nil
		clear(batch)
		t.spare = batch[:0]
	}
	t.busy = false
	t.mu.Unlock()
}

// writeBatch writes batch in one writev (unless an earlier write failed)
// and releases its replies.
func (c *conn) writeBatch(batch []*reply, failed bool) error {
	var err error
	if !failed {
		t := &c.tx
		t.vec = t.vec[:0]
		for _, r := range batch {
			t.vec = append(t.vec, r.segs...)
		}
		if c.raw != nil {
			err = c.raw.writev(t.vec)
		} else {
			v := t.vec
			_, err = v.WriteTo(c.nc)
		}
		if err != nil {
			c.nc.Close()
		}
		clear(t.vec[:cap(t.vec)])
	}
	for _, r := range batch {
		c.release(r)
	}
	return err
}
