package nbd

import (
	"context"
	"errors"
	"fmt"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// reply is one request in progress and then its answer: segs are written
// in order, aliasing hdr (headers) and buf (READ data).
type reply struct {
	req     proto.Request
	cost    int     // in-flight budget held until the reply is written
	payload *[]byte // WRITE data, returned to the pool after the write
	buf     *[]byte // READ data, returned to the pool after sending
	hdr     []byte
	segs    [][]byte
	arr     [64]byte // first backing of hdr
	segArr  [4][]byte
}

func (c *conn) newReply(req proto.Request, cost int) *reply {
	r, ok := c.s.replyPool.Get().(*reply)
	if !ok {
		r = new(reply)
	}
	r.req, r.cost = req, cost
	r.hdr, r.segs = r.arr[:0], r.segArr[:0]
	return r
}

// release returns what r holds once it has been written.
func (c *conn) release(r *reply) {
	c.budget.release(r.cost)
	if r.payload != nil {
		c.putBuf(r.payload)
	}
	if r.buf != nil {
		c.putBuf(r.buf)
	}
	*r = reply{}
	c.s.replyPool.Put(r)
}

// reserve makes room for n more header bytes without moving hdr later.
func (r *reply) reserve(n int) {
	if cap(r.hdr)-len(r.hdr) < n {
		r.hdr = append(make([]byte, 0, len(r.hdr)+n), r.hdr...)
	}
}

// ok sets the success answer of a command without data. Under structured
// replies only a READ must be answered with a chunk (a zero-length READ
// gets NONE with DONE); any other command gets the 16-byte simple reply,
// which the protocol allows and which a client takes in one read (libnbd
// reads a structured header in two: one system call more per WRITE).
func (c *conn) ok(r *reply) {
	if c.structured && r.req.Type == proto.CmdRead {
		r.hdr = proto.AppendNone(r.hdr[:0], r.req.Cookie)
	} else {
		r.hdr = proto.AppendSimpleReply(r.hdr[:0], 0, r.req.Cookie)
	}
	r.segs = append(r.segs[:0], r.hdr)
}

// fail replaces r's answer by the error err: an ERROR chunk with a message
// under structured replies, a simple reply otherwise (never with data).
func (c *conn) fail(r *reply, err error) {
	errno, msg := errnoOf(err, r.req.Type)
	if errno == proto.EIO {
		c.s.opts.Logf("nbd: export %q: %v at %d+%d: %v", c.exp.name, r.req.Type, r.req.Offset, r.req.Length, err)
	}
	if r.buf != nil {
		c.putBuf(r.buf)
		r.buf = nil
	}
	if c.structured {
		r.hdr = proto.AppendError(r.hdr[:0], r.req.Cookie, errno, msg)
	} else {
		r.hdr = proto.AppendSimpleReply(r.hdr[:0], errno, r.req.Cookie)
	}
	r.segs = append(r.segs[:0], r.hdr)
}

// reqError is a request refused with a chosen NBD error value.
type reqError struct {
	errno proto.Errno
	msg   string
}

func (e *reqError) Error() string { return fmt.Sprintf("%v: %s", e.errno, e.msg) }

func reqErr(errno proto.Errno, format string, args ...any) error {
	return &reqError{errno: errno, msg: fmt.Sprintf(format, args...)}
}

// errnoOf maps an error to the NBD error value and message sent for it (see
// the package documentation for the table).
func errnoOf(err error, cmd proto.Cmd) (proto.Errno, string) {
	var re *reqError
	switch {
	case errors.As(err, &re):
		return re.errno, re.msg
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return proto.ESHUTDOWN, "server shutting down: " + err.Error()
	case errors.Is(err, blockdev.ErrOutOfRange):
		if cmd == proto.CmdWrite || cmd == proto.CmdWriteZeroes {
			return proto.ENOSPC, err.Error()
		}
		return proto.EINVAL, err.Error()
	case errors.Is(err, blockdev.ErrNoSpace):
		return proto.ENOSPC, err.Error()
	case errors.Is(err, blockdev.ErrInvalid):
		return proto.EINVAL, err.Error()
	case errors.Is(err, blockdev.ErrFenced):
		return proto.EPERM, err.Error()
	}
	return proto.EIO, err.Error()
}

// size is the number of bytes r's answer puts on the wire.
func (r *reply) size() int {
	n := 0
	for _, s := range r.segs {
		n += len(s)
	}
	return n
}
