// Package nbdtest is a small NBD client for tests: it connects with the
// fixed newstyle handshake and NBD_OPT_GO, then issues READ, WRITE (with or
// without FUA), FLUSH, TRIM and WRITE_ZEROES over one TCP or unix socket,
// with any number of requests in flight at once. A Client is a
// blockdev.Device, so a test can drive a served export with the same code
// that drives a local device and check it against the same model.
//
// It is deliberately plain: simple replies only (structured replies are not
// negotiated), no TLS (NewPKI makes certificates for testing TLS servers
// with other clients), no block status, no reconnect. Requests are checked
// for alignment (to the export's minimum block size) and bounds before
// they are sent, so a misaligned or out-of-range call fails locally with
// blockdev.ErrInvalid or blockdev.ErrOutOfRange, as the Device contract asks.
//
// Wire format: the messages of nbd/proto (greeting, client flags, option
// header + NBD_OPT_GO data, option replies, 28-byte requests with the WRITE
// payload after them, 16-byte simple replies with the READ data after
// them). Error values map to classes: EINVAL -> ErrInvalid, ENOSPC ->
// ErrOutOfRange, EPERM -> ErrFenced, anything else -> ErrUnavailable; the
// *Error in the chain names the command and the errno.
//
// Concurrency: a Client is safe for concurrent use. Each call sends its
// request under a write lock and waits for its reply; one reader goroutine
// hands replies to their callers by cookie, in whatever order the server
// sends them. A call whose context ends closes the connection (a reply cannot
// be abandoned half-read without losing the stream), failing every call in
// flight with ErrUnavailable; the Client is then unusable.
package nbdtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// maxOptionReply bounds the data of one option reply the client accepts.
const maxOptionReply = 64 << 10

// Error is a request the server answered with a nonzero error value.
type Error struct {
	Cmd   proto.Cmd
	Errno proto.Errno
}

func (e *Error) Error() string { return fmt.Sprintf("nbd: %v: %v", e.Cmd, e.Errno) }

// class returns the blockdev error class of errno.
func class(errno proto.Errno) error {
	switch errno {
	case proto.EINVAL:
		return blockdev.ErrInvalid
	case proto.ENOSPC:
		return blockdev.ErrOutOfRange
	case proto.EPERM:
		return blockdev.ErrFenced
	}
	return blockdev.ErrUnavailable
}

// Client is one connection to one export. See the package doc.
type Client struct {
	conn  net.Conn
	size  int64
	bs    int
	flags proto.TransmissionFlags

	wmu sync.Mutex // orders request writes

	mu      sync.Mutex
	pending map[uint64]*call
	next    uint64
	err     error         // why the connection ended; set once
	done    chan struct{} // closed when the reader goroutine exits
}

// call is a request waiting for its reply.
type call struct {
	cmd  proto.Cmd
	buf  []byte // READ destination
	errc chan error
}

var (
	_ blockdev.Device    = (*Client)(nil)
	_ blockdev.FUAWriter = (*Client)(nil)
)

// Dial connects to address on network ("tcp" or "unix") and negotiates
// export with NBD_OPT_GO. ctx bounds the dial and the handshake.
func Dial(ctx context.Context, network, address, export string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, blockdev.Mark(fmt.Errorf("nbd dial %s: %w", address, err), blockdev.ErrUnavailable)
	}
	c, err := NewClient(ctx, conn, export)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// NewClient runs the handshake for export on an established connection and
// returns a Client that owns conn.
func NewClient(ctx context.Context, conn net.Conn, export string) (*Client, error) {
	c := &Client{conn: conn, bs: 512, pending: map[uint64]*call{}, next: 1, done: make(chan struct{})}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	err := c.handshake(export)
	if !stop() {
		err = errors.Join(ctx.Err(), err)
	}
	if err != nil {
		return nil, blockdev.Mark(fmt.Errorf("nbd handshake: %w", err), blockdev.ErrUnavailable)
	}
	go c.readLoop()
	return c, nil
}

// handshake: greeting, client flags, NBD_OPT_GO and its replies.
func (c *Client) handshake(export string) error {
	var g [proto.GreetingSize]byte
	if _, err := io.ReadFull(c.conn, g[:]); err != nil {
		return err
	}
	hf, err := proto.ParseGreeting(g[:])
	if err != nil {
		return err
	}
	if hf&proto.FlagFixedNewstyle == 0 {
		return fmt.Errorf("server does not offer fixed newstyle (flags %#x)", uint16(hf))
	}
	cf := proto.FlagCFixedNewstyle
	if hf&proto.FlagNoZeroes != 0 {
		cf |= proto.FlagCNoZeroes
	}
	req := proto.AppendClientFlags(nil, cf)
	data := proto.AppendInfoRequest(nil, proto.InfoRequest{Name: export, Infos: []proto.InfoType{proto.InfoBlockSize}})
	req = proto.AppendOption(req, proto.OptGo, data)
	if _, err := c.conn.Write(req); err != nil {
		return err
	}
	return c.goReplies()
}

// goReplies reads the replies to NBD_OPT_GO up to its ACK.
func (c *Client) goReplies() error {
	gotExport := false
	for {
		var hb [proto.OptionReplyHeaderSize]byte
		if _, err := io.ReadFull(c.conn, hb[:]); err != nil {
			return err
		}
		h, err := proto.ParseOptionReplyHeader(hb[:])
		if err != nil {
			return err
		}
		if h.Option != proto.OptGo || h.Length > maxOptionReply {
			return fmt.Errorf("reply to %v of %d bytes to NBD_OPT_GO: %w", h.Option, h.Length, proto.ErrMalformed)
		}
		data := make([]byte, h.Length)
		if _, err := io.ReadFull(c.conn, data); err != nil {
			return err
		}
		switch {
		case h.Type.IsError():
			return fmt.Errorf("NBD_OPT_GO refused (reply type %#x): %q", uint32(h.Type), data)
		case h.Type == proto.RepAck:
			if !gotExport {
				return fmt.Errorf("NBD_OPT_GO acknowledged without NBD_INFO_EXPORT: %w", proto.ErrMalformed)
			}
			return nil
		case h.Type == proto.RepInfo:
			in, err := proto.ParseInfo(data)
			if err != nil {
				return err
			}
			gotExport = gotExport || in.Type == proto.InfoExport
			c.applyInfo(in)
		}
	}
}

func (c *Client) applyInfo(in proto.Info) {
	switch in.Type {
	case proto.InfoExport:
		c.size, c.flags = int64(in.Size), in.Flags
	case proto.InfoBlockSize:
		c.bs = int(max(in.BlockSize.Min, 512))
	}
}

// Flags returns the export's transmission flags.
func (c *Client) Flags() proto.TransmissionFlags { return c.flags }

// Size implements blockdev.Device: the export size.
func (c *Client) Size() int64 { return c.size }

// BlockSize implements blockdev.Device: the export's minimum block size, the
// alignment every request must have (512 when the server advertised none or
// less). The preferred size is a performance hint (a volume's stripe), not
// a block.
func (c *Client) BlockSize() int { return c.bs }

// readLoop reads replies until the connection ends, then fails every call
// in flight.
func (c *Client) readLoop() {
	defer close(c.done)
	err := c.readReplies()
	c.mu.Lock()
	if c.err == nil {
		c.err = blockdev.Mark(fmt.Errorf("nbd connection: %w", err), blockdev.ErrUnavailable)
	}
	for id, cl := range c.pending {
		cl.errc <- c.err
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

func (c *Client) readReplies() error {
	var hb [proto.SimpleReplySize]byte
	for {
		if _, err := io.ReadFull(c.conn, hb[:]); err != nil {
			return err
		}
		errno, cookie, err := proto.ParseSimpleReply(hb[:])
		if err != nil {
			return err
		}
		c.mu.Lock()
		cl := c.pending[cookie]
		delete(c.pending, cookie)
		c.mu.Unlock()
		if cl == nil {
			return fmt.Errorf("reply with unknown cookie %d: %w", cookie, proto.ErrMalformed)
		}
		if errno != 0 {
			e := &Error{Cmd: cl.cmd, Errno: errno}
			cl.errc <- blockdev.Mark(e, class(errno))
			continue
		}
		if cl.cmd == proto.CmdRead {
			if _, err := io.ReadFull(c.conn, cl.buf); err != nil {
				cl.errc <- blockdev.Mark(err, blockdev.ErrUnavailable)
				return err
			}
		}
		cl.errc <- nil
	}
}

// do sends one request (with payload for WRITE) and waits for its reply.
func (c *Client) do(ctx context.Context, cmd proto.Cmd, flags proto.CmdFlags, off, n int64, p []byte) error {
	cl := &call{cmd: cmd, errc: make(chan error, 1)}
	if cmd == proto.CmdRead {
		cl.buf = p
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	cookie := c.next
	c.next++
	c.pending[cookie] = cl
	c.mu.Unlock()
	hdr := proto.AppendRequest(make([]byte, 0, proto.RequestSize), proto.Request{
		Flags: flags, Type: cmd, Cookie: cookie, Offset: uint64(off), Length: uint32(n)})
	bufs := net.Buffers{hdr}
	if cmd == proto.CmdWrite {
		bufs = append(bufs, p)
	}
	c.wmu.Lock()
	_, err := bufs.WriteTo(c.conn)
	c.wmu.Unlock()
	if err != nil {
		c.conn.Close() // the reader fails this call and the others
	}
	select {
	case err := <-cl.errc:
		return err
	case <-ctx.Done():
		c.conn.Close()
		<-cl.errc // the buffer is ours again once the reader has let go of it
		return blockdev.Mark(fmt.Errorf("nbd %v: %w", cmd, ctx.Err()), blockdev.ErrUnavailable)
	}
}

// check validates a request of n bytes at off locally.
func (c *Client) check(off, n int64) error {
	bs := int64(c.bs)
	switch {
	case off < 0 || n < 0 || off%bs != 0 || n%bs != 0:
		return blockdev.Mark(fmt.Errorf("nbd: off %d len %d not aligned to %d", off, n, bs), blockdev.ErrInvalid)
	case off > c.size || n > c.size-off:
		return blockdev.Mark(fmt.Errorf("nbd: off %d len %d past the export's %d bytes", off, n, c.size), blockdev.ErrOutOfRange)
	case n > 0xFFFFFFFF:
		return blockdev.Mark(fmt.Errorf("nbd: request of %d bytes", n), blockdev.ErrInvalid)
	}
	return nil
}

// ReadAt implements blockdev.Device with one NBD_CMD_READ.
func (c *Client) ReadAt(ctx context.Context, p []byte, off int64) error {
	return c.rw(ctx, proto.CmdRead, 0, p, off)
}

// WriteAt implements blockdev.Device with one NBD_CMD_WRITE.
func (c *Client) WriteAt(ctx context.Context, p []byte, off int64) error {
	return c.rw(ctx, proto.CmdWrite, 0, p, off)
}

// WriteAtFUA implements blockdev.FUAWriter: NBD_CMD_WRITE with FUA when the
// export offers it, otherwise a write followed by a flush.
func (c *Client) WriteAtFUA(ctx context.Context, p []byte, off int64) error {
	if c.flags&proto.FlagSendFUA != 0 {
		return c.rw(ctx, proto.CmdWrite, proto.CmdFlagFUA, p, off)
	}
	if err := c.WriteAt(ctx, p, off); err != nil {
		return err
	}
	return c.Flush(ctx)
}

func (c *Client) rw(ctx context.Context, cmd proto.Cmd, flags proto.CmdFlags, p []byte, off int64) error {
	if err := c.check(off, int64(len(p))); err != nil || len(p) == 0 {
		return err
	}
	return c.do(ctx, cmd, flags, off, int64(len(p)), p)
}

// Flush implements blockdev.Device with NBD_CMD_FLUSH (nothing when the
// export does not offer it).
func (c *Client) Flush(ctx context.Context) error {
	if c.flags&proto.FlagSendFlush == 0 {
		return c.closedErr()
	}
	return c.do(ctx, proto.CmdFlush, 0, 0, 0, nil)
}

// WriteZeroes implements blockdev.Device with NBD_CMD_WRITE_ZEROES and
// NO_HOLE, or by writing zeros when the export does not offer it.
func (c *Client) WriteZeroes(ctx context.Context, off, n int64) error {
	return c.zeroing(ctx, proto.CmdFlagNoHole, off, n)
}

// Trim implements blockdev.Device with NBD_CMD_WRITE_ZEROES without NO_HOLE:
// the server may release the space, and the range reads back as zeros, as
// the Device contract requires of Trim (NBD_CMD_TRIM does not promise that).
func (c *Client) Trim(ctx context.Context, off, n int64) error {
	return c.zeroing(ctx, 0, off, n)
}

func (c *Client) zeroing(ctx context.Context, flags proto.CmdFlags, off, n int64) error {
	if err := c.check(off, n); err != nil || n == 0 {
		return err
	}
	if c.flags&proto.FlagSendWriteZeroes == 0 {
		return c.writeZeros(ctx, off, n)
	}
	for n > 0 {
		m := min(n, 1<<30)
		if err := c.do(ctx, proto.CmdWriteZeroes, flags, off, m, nil); err != nil {
			return err
		}
		off, n = off+m, n-m
	}
	return nil
}

func (c *Client) writeZeros(ctx context.Context, off, n int64) error {
	z := make([]byte, min(n, 1<<20))
	for n > 0 {
		m := min(n, int64(len(z)))
		if err := c.WriteAt(ctx, z[:m], off); err != nil {
			return err
		}
		off, n = off+m, n-m
	}
	return nil
}

func (c *Client) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close implements blockdev.Device: it sends NBD_CMD_DISC, closes the
// connection and waits for the reader; calls in flight fail with
// ErrUnavailable, and so does every later call. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	first := c.err == nil
	if first {
		c.err = blockdev.Mark(errors.New("nbd client closed"), blockdev.ErrUnavailable)
	}
	c.mu.Unlock()
	if first && c.wmu.TryLock() { // a writer stuck on a full socket: skip the courtesy
		c.conn.Write(proto.AppendRequest(nil, proto.Request{Type: proto.CmdDisc}))
		c.wmu.Unlock()
	}
	err := c.conn.Close()
	<-c.done
	if !first || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
