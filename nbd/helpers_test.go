package nbd

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// checkGoroutines fails t if, after cleanup, more goroutines run than before
// the test started (no leak from Serve/ServeConn/Close).
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() { testutil.WaitGoroutines(t, before) })
}

// newMem returns an empty Mem device.
func newMem(t *testing.T, size int64, bs int) *blockdev.Mem {
	t.Helper()
	m, err := blockdev.NewMem(size, bs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// serve starts a server on a TCP port of 127.0.0.1 (or a unix socket when
// network is "unix") and returns it with its address. Cleanup closes it and
// checks that no goroutine is left behind.
func serve(t *testing.T, opts Options, network string) (*Server, string) {
	t.Helper()
	checkGoroutines(t)
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	s, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = t.TempDir() + "/nbd.sock"
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), l) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil && !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, l.Addr().String()
}

func serveMem(t *testing.T, size int64, bs int) (*blockdev.Mem, string) {
	t.Helper()
	m := newMem(t, size, bs)
	_, addr := serve(t, Options{Exports: map[string]Export{"mem": {Device: m, Description: "test export"}}}, "tcp")
	return m, addr
}

// rawClient speaks NBD by hand, for edge cases real clients never produce.
type rawClient struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

// dialRaw connects, reads the greeting and sends client flags.
func dialRaw(t *testing.T, network, addr string, flags proto.ClientFlags) *rawClient {
	t.Helper()
	return dialRawWith(t, net.Dialer{}, network, addr, flags)
}

// dialRawFrom is dialRaw over TCP from the local address from (the whole of
// 127/8 is this host).
func dialRawFrom(t *testing.T, from, addr string, flags proto.ClientFlags) *rawClient {
	t.Helper()
	return dialRawWith(t, net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}, "tcp", addr, flags)
}

func dialRawWith(t *testing.T, d net.Dialer, network, addr string, flags proto.ClientFlags) *rawClient {
	t.Helper()
	c, err := d.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	rc := &rawClient{t: t, c: c, br: bufio.NewReader(c)}
	g := rc.read(proto.GreetingSize)
	hf, err := proto.ParseGreeting(g)
	if err != nil || hf != proto.FlagFixedNewstyle|proto.FlagNoZeroes {
		t.Fatalf("greeting %x: flags %v, %v", g, hf, err)
	}
	rc.write(proto.AppendClientFlags(nil, flags))
	return rc
}

func (rc *rawClient) read(n int) []byte {
	rc.t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(rc.br, b); err != nil {
		rc.t.Fatalf("read %d bytes: %v", n, err)
	}
	return b
}

func (rc *rawClient) write(b []byte) {
	rc.t.Helper()
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// option sends an option and returns its replies up to the final one.
func (rc *rawClient) option(code proto.Option, data []byte) []optReply {
	rc.t.Helper()
	rc.write(proto.AppendOption(nil, code, data))
	var out []optReply
	for {
		h, err := proto.ParseOptionReplyHeader(rc.read(proto.OptionReplyHeaderSize))
		if err != nil {
			rc.t.Fatal(err)
		}
		if h.Option != code {
			rc.t.Fatalf("reply for %v to %v", h.Option, code)
		}
		r := optReply{typ: h.Type, data: rc.read(int(h.Length))}
		out = append(out, r)
		if h.Type == proto.RepAck || h.Type.IsError() {
			return out
		}
	}
}

type optReply struct {
	typ  proto.ReplyType
	data []byte
}

// goExport negotiates structured replies and base:allocation when asked,
// then enters transmission with NBD_OPT_GO.
func (rc *rawClient) goExport(name string, structured bool) (uint64, proto.TransmissionFlags) {
	rc.t.Helper()
	if structured {
		if r := rc.option(proto.OptStructuredReply, nil); r[0].typ != proto.RepAck {
			rc.t.Fatalf("STRUCTURED_REPLY: %v", r[0].typ)
		}
		req := proto.AppendMetaContextRequest(nil, proto.MetaContextRequest{Name: name, Queries: []string{proto.MetaContextBaseAllocation}})
		if r := rc.option(proto.OptSetMetaContext, req); len(r) != 2 || r[0].typ != proto.RepMetaContext {
			rc.t.Fatalf("SET_META_CONTEXT: %+v", r)
		}
	}
	replies := rc.option(proto.OptGo, proto.AppendInfoRequest(nil, proto.InfoRequest{Name: name}))
	last := replies[len(replies)-1]
	if last.typ != proto.RepAck {
		rc.t.Fatalf("GO %q: %v %s", name, last.typ, last.data)
	}
	for _, r := range replies {
		if in, err := proto.ParseInfo(r.data); r.typ == proto.RepInfo && err == nil && in.Type == proto.InfoExport {
			return in.Size, in.Flags
		}
	}
	rc.t.Fatal("GO without NBD_INFO_EXPORT")
	return 0, 0
}

func (rc *rawClient) send(req proto.Request, payload []byte) {
	rc.t.Helper()
	rc.write(append(proto.AppendRequest(nil, req), payload...))
}

// simple reads a simple reply; dataLen bytes follow a successful READ.
func (rc *rawClient) simple(dataLen int) (proto.Errno, uint64, []byte) {
	rc.t.Helper()
	errno, cookie, err := proto.ParseSimpleReply(rc.read(proto.SimpleReplySize))
	if err != nil {
		rc.t.Fatal(err)
	}
	if errno != 0 {
		return errno, cookie, nil
	}
	return errno, cookie, rc.read(dataLen)
}

// chunk is one structured reply chunk, or a simple reply (which a server
// may send under structured replies for any command but READ) seen as a
// DONE chunk with simple set.
type chunk struct {
	proto.ChunkHeader
	payload []byte
	simple  bool
	errno   proto.Errno // of a simple reply
}

func (rc *rawClient) chunk() chunk {
	rc.t.Helper()
	magic, err := rc.br.Peek(4)
	if err != nil {
		rc.t.Fatal(err)
	}
	if binary.BigEndian.Uint32(magic) == proto.MagicSimpleReply {
		errno, cookie, err := proto.ParseSimpleReply(rc.read(proto.SimpleReplySize))
		if err != nil {
			rc.t.Fatal(err)
		}
		h := proto.ChunkHeader{Flags: proto.ReplyFlagDone, Type: proto.ChunkNone, Cookie: cookie}
		return chunk{ChunkHeader: h, simple: true, errno: errno}
	}
	h, err := proto.ParseChunkHeader(rc.read(proto.ChunkHeaderSize))
	if err != nil {
		rc.t.Fatal(err)
	}
	return chunk{ChunkHeader: h, payload: rc.read(int(h.Length))}
}

// structured reads the chunks of one reply (up to DONE), failing on chunks
// of another cookie.
func (rc *rawClient) structured(cookie uint64) []chunk {
	rc.t.Helper()
	var out []chunk
	for {
		c := rc.chunk()
		if c.Cookie != cookie {
			rc.t.Fatalf("chunk for cookie %d, want %d", c.Cookie, cookie)
		}
		out = append(out, c)
		if c.Flags&proto.ReplyFlagDone != 0 {
			return out
		}
	}
}

// errnoOfChunks returns the error of a structured reply, 0 for success.
func errnoOfChunks(t *testing.T, cs []chunk) proto.Errno {
	t.Helper()
	for _, c := range cs {
		if c.simple {
			return c.errno
		}
		if c.Type.IsError() {
			e, err := proto.ParseErrorPayload(c.Type, c.payload)
			if err != nil {
				t.Fatal(err)
			}
			return e.Errno
		}
	}
	return 0
}

// expectClosed checks that the server closes the connection.
func (rc *rawClient) expectClosed() {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.ReadAll(rc.br)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		rc.t.Fatalf("connection not closed by the server: %v", err)
	}
}

// gateDev delays reads of chosen offsets until released, to force replies
// out of order; other calls go straight to the Mem.
type gateDev struct {
	*blockdev.Mem
	mu      sync.Mutex
	gates   map[int64]chan struct{}
	arrived map[int64]chan struct{} // closed when a read reaches its gate
}

func (g *gateDev) gate(off int64) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gates == nil {
		g.gates = make(map[int64]chan struct{})
		g.arrived = make(map[int64]chan struct{})
	}
	ch := make(chan struct{})
	g.gates[off] = ch
	g.arrived[off] = make(chan struct{})
	return ch
}

// waitArrived waits until a read of off (gated) reaches the device.
func (g *gateDev) waitArrived(t *testing.T, off int64) {
	t.Helper()
	g.mu.Lock()
	ch := g.arrived[off]
	g.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(time.Minute): // a hang guard
		t.Fatalf("no read of offset %d reached the device", off)
	}
}

// Synchronous is false: a gated read waits (the embedded Mem's would say
// true, and the server would then run requests one after another).
func (g *gateDev) Synchronous() bool { return false }

func (g *gateDev) ReadAt(ctx context.Context, p []byte, off int64) error {
	g.mu.Lock()
	ch := g.gates[off]
	if a := g.arrived[off]; a != nil {
		select {
		case <-a:
		default:
			close(a)
		}
	}
	g.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Mem.ReadAt(ctx, p, off)
}

// errDev fails every call with err.
type errDev struct {
	*blockdev.Mem
	err error
}

func (d *errDev) ReadAt(context.Context, []byte, int64) error  { return d.err }
func (d *errDev) WriteAt(context.Context, []byte, int64) error { return d.err }
func (d *errDev) Flush(context.Context) error                  { return d.err }
func (d *errDev) Allocated(context.Context, int64, int64) ([]blockdev.Extent, error) {
	return nil, d.err
}

// fastZeroDev is a Mem that says zeroing is fast when trimming is allowed.
type fastZeroDev struct{ *blockdev.Mem }

func (fastZeroDev) ZeroIsFast(off, n int64, mayTrim bool) bool { return mayTrim }

var _ FastZeroer = fastZeroDev{}

func mustf(t *testing.T, err error, format string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}

func newBenchMem(size int64) (*blockdev.Mem, error) { return blockdev.NewMem(size, 4096) }
