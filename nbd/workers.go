package nbd

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// job is one request as read, before it runs.
type job struct {
	req     proto.Request
	payload *[]byte // WRITE data
	cost    int
}

// errDisc ends reading at the client's DISC request.
var errDisc = errors.New("nbd: client sent DISC")

// work is one worker goroutine: it waits for the reader's turn, reads a
// request, makes sure another worker will read the next one (unless the
// connection runs requests one after another: pipelined), then runs its
// request and sends the reply itself; until reading ends. A request is thus
// read, run and answered on one goroutine (a WRITE's payload, a READ's data
// stay in one CPU's cache), with no handoff between a reader and a worker;
// the cost is one wakeup per request, of the next reader. Workers live until
// the connection ends: at most Options.MaxInFlight+1 of them, as many as
// there were requests in flight at once, plus the reader.
func (c *conn) work(ctx context.Context) {
	defer c.workers.Done()
	for {
		j, ok := c.next(ctx)
		if !ok {
			return
		}
		c.handle(j)
	}
}

// next takes the reader's turn and reads the next request; ok is false when
// reading has ended (DISC, EOF, a protocol error or shutdown).
func (c *conn) next(ctx context.Context) (j job, ok bool) {
	c.waiting.Add(1)
	c.rmu.Lock()
	c.waiting.Add(-1)
	defer c.rmu.Unlock()
	for !c.stopped {
		jp, err := c.readRequest(ctx)
		if err != nil {
			c.readEnded(ctx, err)
			return job{}, false
		}
		if jp == nil {
			continue
		}
		if c.pipelined() && c.waiting.Load() == 0 && c.nworkers <= c.s.opts.MaxInFlight {
			c.nworkers++
			c.workers.Add(1)
			go c.work(ctx)
		}
		return *jp, true
	}
	return job{}, false
}

// pipelined reports whether the connection runs requests side by side, so
// that a worker reading one request makes sure another will read the next
// (Options.PipelineSynchronous). When it is false the one worker reads,
// runs and answers each request in turn. The device is asked every time: a
// volume becomes synchronous once its first segment opens.
func (c *conn) pipelined() bool {
	return c.s.opts.PipelineSynchronous || !blockdev.IsSynchronous(c.exp.Device)
}

// handle runs one request and sends its reply.
func (c *conn) handle(j job) {
	if j.req.Type == proto.CmdRead {
		c.waitBacklog()
	}
	r := c.newReply(j.req, j.cost)
	r.payload = j.payload
	if c.clientGone(j.req) {
		c.fail(r, errClientGone)
	} else if err := c.exec(r); err != nil {
		c.fail(r, err)
	}
	c.send(r)
}

// sender serialises the socket's write side. There is no writer goroutine:
// the worker that finds the sender idle becomes the writer and sends its own
// reply at once, while its READ data is still in this CPU's cache, then
// whatever replies others queued meanwhile, gathered into one writev, until
// the queue is empty.
//
// It also paces READs (Options.ReplyBacklog): a READ starts its device IO
// only while fewer than that many reply bytes wait to be written. When the
// client drains the socket slower than the device fills replies, reading
// further ahead only lets replies wait, and data that waits has left the
// cache by the time it is copied into the socket.
type sender struct {
	mu      sync.Mutex
	busy    bool     // REQUIRES: mu held
	failed  bool     // a write failed: replies are dropped; REQUIRES: mu held
	queue   []*reply // REQUIRES: mu held
	spare   []*reply // the previous batch's backing array, reused
	vec     net.Buffers
	until   time.Time // the socket's write deadline; only the writer uses it
	backlog int       // bytes of the replies queued or being written; REQUIRES: mu held
	room    sync.Cond // broadcast when backlog falls or a write fails; L is &mu
}

// waitBacklog waits while the replies waiting to be written reach
// Options.ReplyBacklog (or until a write fails: the reply will be dropped).
func (c *conn) waitBacklog() {
	limit := c.s.opts.ReplyBacklog
	if limit < 0 {
		return
	}
	t := &c.tx
	t.mu.Lock()
	for t.backlog >= limit && !t.failed {
		t.room.Wait()
	}
	t.mu.Unlock()
}

// send queues r and, unless another worker is writing, writes the queue.
// After a write error it closes the socket (so the reader stops) and drops
// the replies that follow; every reply is released either way.
func (c *conn) send(r *reply) {
	t := &c.tx
	t.mu.Lock()
	t.queue = append(t.queue, r)
	t.backlog += r.size()
	if t.busy {
		t.mu.Unlock()
		return
	}
	t.busy = true
	for len(t.queue) > 0 {
		batch, failed := t.queue, t.failed
		t.queue = t.spare[:0]
		t.mu.Unlock()
		n := 0
		for _, r := range batch {
			n += r.size()
		}
		err := c.writeBatch(batch, failed, n)
		t.mu.Lock()
		t.backlog -= n
		t.failed = t.failed || err != nil
		t.room.Broadcast()
		clear(batch)
		t.spare = batch[:0]
	}
	t.busy = false
	t.mu.Unlock()
}

// writeBatch writes batch, n bytes, in one writev (unless an earlier write
// failed) and releases its replies.
func (c *conn) writeBatch(batch []*reply, failed bool, n int) error {
	var err error
	if !failed {
		c.replyDeadline(n)
		t := &c.tx
		t.vec = t.vec[:0]
		for _, r := range batch {
			t.vec = append(t.vec, r.segs...)
		}
		if c.raw != nil {
			err = c.raw.Writev(t.vec)
		} else {
			v := t.vec
			_, err = v.WriteTo(c.writer())
		}
		if err != nil {
			c.replyTimedOut(err)
			c.cancelIO() // the client is gone: requests not started are dropped
			c.nc.Close()
		}
		clear(t.vec[:cap(t.vec)])
	}
	for _, r := range batch {
		c.release(r)
	}
	return err
}
