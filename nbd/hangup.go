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
// write.
//
// So ioCtx is cancelled once the client is certainly gone: reading fails or
// meets EOF without DISC (and without a shutdown of ours), a reply cannot be
// written, or the socket is shut down both ways or reset. A request checks
// it before its IO starts and is then answered ESHUTDOWN (the answer goes
// nowhere) without touching the device; the reader stops waiting for room
// in the in-flight budget. That is not enough alone: requests the client
// sent before it hung up wait in the socket's receive buffer ahead of the
// EOF, and over TCP a reply written to a closed peer still succeeds, so a
// stale request can be read and started before anything failed. A request
// that changes data therefore also polls the socket (one system call) and
// is dropped when the peer has shut its sending side down, unless the
// client sent DISC first: a client may send DISC and shut its side down
// while it waits for the replies, and requests before DISC must run. One
// case stays wrong that way: requests queued before a DISC the reader has
// not reached yet are answered ESHUTDOWN (a visible error, never lost
// data; the protocol asks clients to wait for their replies before DISC).
//
// A request whose IO has started finishes: see the package documentation.

// errClientGone answers the requests dropped because the client has gone.
var errClientGone = fmt.Errorf("nbd: the client hung up before the request started: %w", context.Canceled)

// readEnded records why reading stopped, and cancels the device IO of
// requests not yet started when the client is gone: reading failed with
// neither a shutdown nor the removal of the export (which let requests in
// progress finish) nor DISC (whose requests the protocol asks to finish).
// REQUIRES: rmu held.
func (c *conn) readEnded(ctx context.Context, err error) {
	c.stopped = true
	if err == errDisc {
		c.disc.Store(true)
		return
	}
	c.readErr = err
	if ctx.Err() == nil && c.exp.ctx.Err() == nil {
		c.cancelIO()
	}
}

// clientGone says whether req must be dropped because the client has gone.
func (c *conn) clientGone(req proto.Request) bool {
	if c.ioCtx.Err() != nil {
		return true
	}
	switch req.Type {
	case proto.CmdWrite, proto.CmdTrim, proto.CmdWriteZeroes:
	default:
		return false
	}
	if c.raw == nil {
		return false
	}
	shutWrite, dead := c.raw.PeerGone()
	if dead {
		c.cancelIO()
	}
	return dead || shutWrite && !c.disc.Load()
}
