package nbd

import (
	"context"
	"fmt"

	"github.com/nvstripe/nvstripe/nbd/proto"
)

// A request of a connection whose client has gone must not start its IO.
// The kernel's nbd driver, when a request times out, shuts that socket down
// and sends the request again on another connection (or on the socket that
// replaces it); the filesystem may then write newer data to the same blocks
// there, and have it acknowledged. Were the first copy, still queued here,
// to run after that, it would put the old data back over an acknowledged
// write. So once the client is gone (the socket reads EOF or fails, a reply
// cannot be written, or the peer has shut the socket down while requests
// still sit in its receive buffer) ioCtx is cancelled, and a request checks
// it, and the socket, before its IO starts: it is answered ESHUTDOWN (the
// answer goes nowhere) without touching the device. A request whose IO has
// started finishes: it started before the client gave up on it.

// errClientGone answers the requests dropped because the client has gone.
var errClientGone = fmt.Errorf("nbd: the client hung up before the request started: %w", context.Canceled)

// readEnded records why reading stopped, and cancels the device IO of
// requests not yet started when the client is gone: reading failed with
// neither a shutdown nor the removal of the export (which let requests in
// progress finish) nor DISC (whose requests the protocol asks to finish).
func (c *conn) readEnded(ctx context.Context, err error) {
	c.stopped = true
	if err == errDisc {
		return
	}
	c.readErr = err
	if ctx.Err() == nil && c.exp.ctx.Err() == nil {
		c.cancelIO()
	}
}

// clientGone says whether req must be dropped because the client has gone.
// Requests that change data also look at the socket: its peer may have shut
// it down while this request and others still wait in its receive buffer,
// unseen by the reader (a poll, one system call per such request).
func (c *conn) clientGone(req proto.Request) bool {
	if c.ioCtx.Err() != nil {
		return true
	}
	switch req.Type {
	case proto.CmdWrite, proto.CmdTrim, proto.CmdWriteZeroes:
	default:
		return false
	}
	if c.raw != nil && c.raw.peerGone() {
		c.cancelIO()
		return true
	}
	return false
}
