package nbd

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// errnoOf sends req on a connection in the given reply mode and returns
// the error value of its reply.
func (rc *rawClient) errno(structured bool, req proto.Request, payload []byte) proto.Errno {
	rc.t.Helper()
	rc.send(req, payload)
	if structured {
		return errnoOfChunks(rc.t, rc.structured(req.Cookie))
	}
	n := 0
	if req.Type == proto.CmdRead {
		n = int(req.Length)
	}
	errno, cookie, _ := rc.simple(n)
	if cookie != req.Cookie {
		rc.t.Fatalf("cookie %d, want %d", cookie, req.Cookie)
	}
	return errno
}

// Spec "Request types" and "Error values": what each bad request gets.
func TestTransmissionErrors(t *testing.T) {
	const size = 1 << 20
	m := newMem(t, size, 4096)
	_, addr := serve(t, Options{Exports: map[string]Export{"mem": {Device: m}}, MaxRequest: 64 << 10}, "tcp")
	type R = proto.Request
	for _, structured := range []bool{false, true} {
		t.Run(fmt.Sprintf("structured=%v", structured), func(t *testing.T) {
			rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
			rc.goExport("mem", structured)
			for i, tc := range []struct {
				name    string
				req     R
				payload int
				want    proto.Errno
			}{
				{"read past end", R{Type: proto.CmdRead, Offset: size, Length: 512}, 0, proto.EINVAL},
				{"read offset overflow", R{Type: proto.CmdRead, Offset: 1<<64 - 512, Length: 4096}, 0, proto.EINVAL},
				{"write past end", R{Type: proto.CmdWrite, Offset: size - 512, Length: 1024}, 1024, proto.ENOSPC},
				{"write zeroes past end", R{Type: proto.CmdWriteZeroes, Offset: size, Length: 4096}, 0, proto.ENOSPC},
				{"trim past end", R{Type: proto.CmdTrim, Offset: 0, Length: size + 512}, 0, proto.EINVAL},
				{"cache past end", R{Type: proto.CmdCache, Offset: size + 4096, Length: 512}, 0, proto.EINVAL},
				{"read misaligned", R{Type: proto.CmdRead, Offset: 100, Length: 512}, 0, proto.EINVAL},
				{"write misaligned length", R{Type: proto.CmdWrite, Offset: 0, Length: 100}, 100, proto.EINVAL},
				{"unknown command", R{Type: 42}, 0, proto.EINVAL},
				{"resize", R{Type: proto.CmdResize, Offset: 2 * size}, 0, proto.EINVAL},
				{"DF on write", R{Type: proto.CmdWrite, Flags: proto.CmdFlagDF, Length: 512}, 512, proto.EINVAL},
				{"unknown flag", R{Type: proto.CmdFlush, Flags: 1 << 12}, 0, proto.EINVAL},
				{"read over max", R{Type: proto.CmdRead, Length: 128 << 10}, 0, proto.EINVAL},
				{"fast zero not fast", R{Type: proto.CmdWriteZeroes, Flags: proto.CmdFlagFastZero, Length: 4096}, 0, proto.ENOTSUP},
				{"block status length 0", R{Type: proto.CmdBlockStatus, Offset: 0, Length: 0}, 0, proto.EINVAL},
				{"cache ok", R{Type: proto.CmdCache, Offset: 0, Length: size}, 0, 0},
				{"zero-length read", R{Type: proto.CmdRead, Offset: 4096}, 0, 0},
				{"zero-length write", R{Type: proto.CmdWrite, Offset: size}, 0, 0},
			} {
				if !structured && tc.req.Type == proto.CmdBlockStatus {
					continue
				}
				tc.req.Cookie = uint64(1000 + i)
				if got := rc.errno(structured, tc.req, make([]byte, tc.payload)); got != tc.want {
					t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
				}
			}
			if !structured { // BLOCK_STATUS needs a negotiated context
				if got := rc.errno(false, R{Type: proto.CmdBlockStatus, Cookie: 7, Length: 512}, nil); got != proto.EINVAL {
					t.Errorf("block status without context: %v", got)
				}
			}
			// The connection still works after every error.
			if got := rc.errno(structured, R{Type: proto.CmdFlush, Cookie: 9}, nil); got != 0 {
				t.Fatalf("flush after errors: %v", got)
			}
		})
	}
}

// Spec "Request message" / "Terminating the transmission phase": a wrong
// request magic leaves the server no way to find the next request.
func TestWrongRequestMagic(t *testing.T) {
	_, addr := serveMem(t, 1<<20, 512)
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("mem", false)
	b := proto.AppendRequest(nil, proto.Request{Type: proto.CmdRead, Length: 512})
	b[3] ^= 1
	rc.write(b)
	rc.expectClosed()
}

// "Block size constraints": a WRITE over the maximum payload but within
// 32 MiB is consumed and refused; a larger one ends the connection.
func TestOversizedWrite(t *testing.T) {
	m := newMem(t, 64<<20, 512)
	_, addr := serve(t, Options{Exports: map[string]Export{"mem": {Device: m}}, MaxRequest: 64 << 10}, "tcp")
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("mem", true)
	big := proto.Request{Type: proto.CmdWrite, Cookie: 1, Length: 1 << 20}
	if got := rc.errno(true, big, testutil.Pattern(1<<20, 1)); got != proto.EINVAL {
		t.Fatalf("1 MiB write over a 64 KiB maximum: %v", got)
	}
	rc.send(proto.Request{Type: proto.CmdRead, Cookie: 2, Length: 512}, nil)
	if cs := rc.structured(2); errnoOfChunks(t, cs) != 0 {
		t.Fatal("read after refused write failed")
	}
	rc.send(proto.Request{Type: proto.CmdWrite, Cookie: 3, Length: 48 << 20}, nil)
	rc.expectClosed()
}

// Spec "Transmission flags", READ_ONLY: writes are refused with EPERM.
func TestReadOnlyExport(t *testing.T) {
	m := newMem(t, 1<<20, 512)
	_, addr := serve(t, Options{Exports: map[string]Export{"ro": {Device: m, ReadOnly: true}}}, "tcp")
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	_, flags := rc.goExport("ro", false)
	if flags&proto.FlagReadOnly == 0 || flags&(proto.FlagSendTrim|proto.FlagSendWriteZeroes|proto.FlagSendFUA) != 0 {
		t.Fatalf("read-only export flags %#x", flags)
	}
	for i, req := range []proto.Request{
		{Type: proto.CmdWrite, Length: 512},
		{Type: proto.CmdTrim, Length: 512},
		{Type: proto.CmdWriteZeroes, Length: 512},
	} {
		req.Cookie = uint64(i + 1)
		var payload []byte
		if req.Type == proto.CmdWrite {
			payload = make([]byte, 512)
		}
		if got := rc.errno(false, req, payload); got != proto.EPERM {
			t.Errorf("%v on a read-only export: %v, want EPERM", req.Type, got)
		}
	}
}

// Spec "Transmission": replies may come out of order; a slow READ does not
// hold back a later one.
func TestRepliesOutOfOrder(t *testing.T) {
	g := &gateDev{Mem: newMem(t, 1<<20, 512)}
	slow := g.gate(0)
	_, addr := serve(t, Options{Exports: map[string]Export{"g": {Device: g}}}, "tcp")
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("g", false)
	rc.send(proto.Request{Type: proto.CmdRead, Cookie: 1, Offset: 0, Length: 512}, nil)
	rc.send(proto.Request{Type: proto.CmdWrite, Cookie: 2, Offset: 4096, Length: 512}, testutil.Pattern(512, 9))
	rc.send(proto.Request{Type: proto.CmdRead, Cookie: 3, Offset: 8192, Length: 512}, nil)
	seen := map[uint64]bool{}
	for range 2 {
		errno, cookie, err := proto.ParseSimpleReply(rc.read(proto.SimpleReplySize))
		if err != nil || errno != 0 || (cookie != 2 && cookie != 3) {
			t.Fatalf("reply %d errno %v (%v) while request 1 is held", cookie, errno, err)
		}
		if cookie == 3 {
			rc.read(512)
		}
		seen[cookie] = true
	}
	close(slow)
	if errno, cookie, _ := rc.simple(512); errno != 0 || cookie != 1 || len(seen) != 2 {
		t.Fatalf("last reply %d %v", cookie, errno)
	}
}

// probeDev is a Mem that reports itself synchronous and records how many
// reads run at once. Each read lasts a millisecond, so that reads a server
// runs side by side overlap; with wantAtOnce > 0 a read also waits until
// that many are in progress (or 10 s pass: the read then fails).
type probeDev struct {
	*blockdev.Mem
	wantAtOnce int
	mu         sync.Mutex
	changed    sync.Cond
	now, peak  int
}

func newProbeDev(t *testing.T, wantAtOnce int) *probeDev {
	d := &probeDev{Mem: newMem(t, 1<<20, 512), wantAtOnce: wantAtOnce}
	d.changed.L = &d.mu
	return d
}

func (d *probeDev) ReadAt(ctx context.Context, p []byte, off int64) error {
	d.mu.Lock()
	d.now++
	d.peak = max(d.peak, d.now)
	d.changed.Broadcast()
	deadline := time.AfterFunc(10*time.Second, func() {
		d.mu.Lock()
		d.wantAtOnce = 0
		d.changed.Broadcast()
		d.mu.Unlock()
	})
	for d.now < d.wantAtOnce {
		d.changed.Wait()
	}
	deadline.Stop()
	d.mu.Unlock()
	time.Sleep(time.Millisecond)
	d.mu.Lock()
	d.now--
	d.mu.Unlock()
	return d.Mem.ReadAt(ctx, p, off)
}

func (d *probeDev) mostAtOnce() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peak
}

// readMany sends n 512-byte READs at once and checks every reply.
func readMany(t *testing.T, opts Options, n int) {
	t.Helper()
	_, addr := serve(t, opts, "tcp")
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("p", false)
	var batch []byte
	for i := range n {
		batch = proto.AppendRequest(batch, proto.Request{Type: proto.CmdRead, Cookie: uint64(i), Offset: uint64(i * 512), Length: 512})
	}
	rc.write(batch)
	for range n {
		if errno, cookie, _ := rc.simple(512); errno != 0 {
			t.Fatalf("READ %d: errno %v", cookie, errno)
		}
	}
}

// A synchronous device's requests run one after another, however many are
// in flight (Options.PipelineSynchronous).
func TestSynchronousRunsInTurn(t *testing.T) {
	d := newProbeDev(t, 0)
	readMany(t, Options{Exports: map[string]Export{"p": {Device: d}}}, 16)
	if n := d.mostAtOnce(); n != 1 {
		t.Fatalf("%d reads ran at once on a synchronous device; want 1", n)
	}
}

// With PipelineSynchronous they run side by side: each read waits until
// four are in progress.
func TestPipelineSynchronous(t *testing.T) {
	d := newProbeDev(t, 4)
	readMany(t, Options{Exports: map[string]Export{"p": {Device: d}}, PipelineSynchronous: true}, 16)
	if n := d.mostAtOnce(); n < 4 {
		t.Fatalf("at most %d reads ran at once; want 4", n)
	}
}

// Spec NBD_CMD_DISC: outstanding requests are answered before the close.
func TestDiscAnswersInFlight(t *testing.T) {
	g := &gateDev{Mem: newMem(t, 1<<20, 512)}
	slow := g.gate(0)
	_, addr := serve(t, Options{Exports: map[string]Export{"g": {Device: g}}}, "tcp")
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("g", false)
	rc.send(proto.Request{Type: proto.CmdRead, Cookie: 5, Length: 512}, nil)
	rc.send(proto.Request{Type: proto.CmdDisc, Cookie: 6}, nil)
	time.AfterFunc(50*time.Millisecond, func() { close(slow) })
	if errno, cookie, _ := rc.simple(512); errno != 0 || cookie != 5 {
		t.Fatalf("reply %d %v", cookie, errno)
	}
	rc.expectClosed()
}

// Close lets a request in progress finish and sends its reply.
func TestCloseDrainsInFlight(t *testing.T) {
	checkGoroutines(t)
	g := &gateDev{Mem: newMem(t, 1<<20, 512)}
	slow := g.gate(0)
	mustf(t, g.WriteAt(t.Context(), testutil.Pattern(512, 1), 0), "write") // allocated: the read reaches the device
	s, addr := serve(t, Options{Exports: map[string]Export{"g": {Device: g}}}, "tcp")
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("g", true)
	rc.send(proto.Request{Type: proto.CmdRead, Cookie: 5, Length: 512}, nil)
	g.waitArrived(t, 0) // Close stops reading requests: this one must be in flight
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned with a request in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(slow)
	if cs := rc.structured(5); errnoOfChunks(t, cs) != 0 {
		t.Fatal("in-flight read failed during Close")
	}
	rc.expectClosed()
	<-closed
}

// After ShutdownGrace a stuck request is cancelled and the socket closed.
func TestCloseGraceExpires(t *testing.T) {
	g := &gateDev{Mem: newMem(t, 1<<20, 512)}
	g.gate(0) // never released
	s, addr := serve(t, Options{Exports: map[string]Export{"g": {Device: g}}, ShutdownGrace: 50 * time.Millisecond}, "tcp")
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("g", false)
	rc.send(proto.Request{Type: proto.CmdRead, Cookie: 5, Length: 512}, nil)
	g.waitArrived(t, 0)
	s.Close()
	rc.expectClosed()
}

// Structured READ: unallocated ranges come back as OFFSET_HOLE chunks, DF
// forces a single data chunk.
func TestStructuredReadHoles(t *testing.T) {
	const mib = 1 << 20
	m, addr := serveMem(t, 8*mib, 4096)
	data := testutil.Pattern(mib, 5)
	mustf(t, m.WriteAt(t.Context(), data, 2*mib), "write")
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("mem", true)
	rc.send(proto.Request{Type: proto.CmdRead, Cookie: 1, Offset: mib, Length: 3 * mib}, nil)
	cs := rc.structured(1)
	want := []struct {
		typ     proto.ChunkType
		off, n  uint64
		flagged bool
	}{{proto.ChunkOffsetHole, mib, mib, false}, {proto.ChunkOffsetData, 2 * mib, mib, false}, {proto.ChunkOffsetHole, 3 * mib, mib, true}}
	if len(cs) != len(want) {
		t.Fatalf("%d chunks, want %d", len(cs), len(want))
	}
	for i, w := range want {
		off, d, hole, err := proto.ParseOffsetPayload(cs[i].Type, cs[i].payload)
		n := uint64(hole) + uint64(len(d))
		if err != nil || cs[i].Type != w.typ || off != w.off || n != w.n || (cs[i].Flags&proto.ReplyFlagDone != 0) != w.flagged {
			t.Fatalf("chunk %d: %v off %d len %d flags %d (%v), want %+v", i, cs[i].Type, off, n, cs[i].Flags, err, w)
		}
		if d != nil && !bytes.Equal(d, data) {
			t.Fatal("data chunk content differs")
		}
	}
	rc.send(proto.Request{Type: proto.CmdRead, Flags: proto.CmdFlagDF, Cookie: 2, Offset: mib, Length: 2 * mib}, nil)
	cs = rc.structured(2)
	if len(cs) != 1 || cs[0].Type != proto.ChunkOffsetData || len(cs[0].payload) != 8+2*mib {
		t.Fatalf("DF read: %d chunks", len(cs))
	}
	if !bytes.Equal(cs[0].payload[8:8+mib], make([]byte, mib)) || !bytes.Equal(cs[0].payload[8+mib:], data) {
		t.Fatal("DF read content differs")
	}
}

// Spec NBD_CMD_BLOCK_STATUS with base:allocation ("Metadata contexts").
func TestBlockStatus(t *testing.T) {
	const mib = 1 << 20
	m, addr := serveMem(t, 8*mib, 4096)
	mustf(t, m.WriteAt(t.Context(), testutil.Pattern(4096, 1), 3*mib+4096), "write")
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("mem", true)
	type bd = [2]uint32 // length, status
	for i, tc := range []struct {
		off, n uint64
		flags  proto.CmdFlags
		want   []bd
	}{
		{0, 8 * mib, 0, []bd{{3 * mib, 3}, {mib, 0}, {4 * mib, 3}}},
		{3*mib + 512, mib, 0, []bd{{mib - 512, 0}, {512, 3}}},
		{0, 8 * mib, proto.CmdFlagReqOne, []bd{{3 * mib, 3}}},
		{7 * mib, mib, 0, []bd{{mib, 3}}},
	} {
		cookie := uint64(i + 1)
		rc.send(proto.Request{Type: proto.CmdBlockStatus, Flags: tc.flags, Cookie: cookie, Offset: tc.off, Length: uint32(tc.n)}, nil)
		cs := rc.structured(cookie)
		if len(cs) != 1 || cs[0].Type != proto.ChunkBlockStatus {
			t.Fatalf("case %d: %d chunks, first %v", i, len(cs), cs[0].Type)
		}
		id, d, err := proto.ParseBlockStatusPayload(cs[0].payload)
		var got []bd
		for _, e := range d {
			got = append(got, bd{e.Length, e.Status})
		}
		if err != nil || id != metaContextID || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Fatalf("case %d: id %d extents %v (%v), want %v", i, id, d, err, tc.want)
		}
	}
}

// Requests aligned to 512 but not to the 4096-byte device block are served
// by read-modify-write, even when many of them hit the same blocks at once
// from several connections (CAN_MULTI_CONN).
func TestSubBlockIO(t *testing.T) {
	const size = 256 << 10
	m, addr := serveMem(t, size, 4096)
	want := make([]byte, size)
	var wg sync.WaitGroup
	for c := range 4 {
		rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
		rc.goExport("mem", c%2 == 0)
		// Connection c writes sectors s with s%4 == c: every 4 KiB block gets
		// writes from all four connections.
		var reqs []byte
		var n int
		for s := c; s < size/512; s += 4 {
			p := testutil.Pattern(512, byte(s))
			copy(want[s*512:], p)
			reqs = append(proto.AppendRequest(reqs, proto.Request{Type: proto.CmdWrite, Cookie: uint64(s), Offset: uint64(s * 512), Length: 512}), p...)
			n++
		}
		wg.Go(func() {
			rc.write(reqs)
			for range n {
				if c%2 == 0 {
					if e := errnoOfChunks(t, []chunk{rc.chunk()}); e != 0 {
						t.Errorf("write: %v", e)
					}
				} else if e, _, _ := rc.simple(0); e != 0 {
					t.Errorf("write: %v", e)
				}
			}
		})
	}
	wg.Wait()
	got := make([]byte, size)
	mustf(t, m.ReadAt(t.Context(), got, 0), "read back")
	if !bytes.Equal(got, want) {
		t.Fatal("sub-block writes lost data")
	}
	// Sub-block read, trim (a hint: partial blocks stay) and write zeroes.
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("mem", false)
	rc.send(proto.Request{Type: proto.CmdRead, Cookie: 1, Offset: 1536, Length: 5120}, nil)
	if e, _, d := rc.simple(5120); e != 0 || !bytes.Equal(d, want[1536:6656]) {
		t.Fatalf("sub-block read: %v", e)
	}
	if e := rc.errno(false, proto.Request{Type: proto.CmdWriteZeroes, Cookie: 2, Offset: 3584, Length: 9216}, nil); e != 0 {
		t.Fatalf("write zeroes: %v", e)
	}
	clear(want[3584 : 3584+9216])
	if e := rc.errno(false, proto.Request{Type: proto.CmdTrim, Cookie: 3, Offset: 16384 + 512, Length: 8192}, nil); e != 0 {
		t.Fatalf("trim: %v", e)
	}
	clear(want[20480:24576]) // the one whole block inside the trim
	mustf(t, m.ReadAt(t.Context(), got, 0), "read back")
	if !bytes.Equal(got, want) {
		t.Fatal("sub-block zeroing wrong")
	}
}

// FLUSH and FUA reach the device: on a crashable Mem, what a crash keeps.
func TestFlushAndFUA(t *testing.T) {
	m, err := blockdev.NewCrashableMem(1<<20, 4096)
	mustf(t, err, "mem")
	_, addr := serve(t, Options{Exports: map[string]Export{"m": {Device: m}}}, "tcp")
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("m", true)
	a, b := testutil.Pattern(4096, 1), testutil.Pattern(4096, 2)
	mustErrno(t, rc.errno(true, proto.Request{Type: proto.CmdWrite, Cookie: 1, Offset: 0, Length: 4096}, a))
	mustErrno(t, rc.errno(true, proto.Request{Type: proto.CmdWrite, Flags: proto.CmdFlagFUA, Cookie: 2, Offset: 8192, Length: 4096}, b))
	got := make([]byte, 4096)
	crash := m.CrashClone()
	mustf(t, crash.ReadAt(t.Context(), got, 0), "read")
	if bytes.Equal(got, a) {
		t.Fatal("unflushed write survived a crash: test cannot tell flushes apart")
	}
	mustf(t, crash.ReadAt(t.Context(), got, 8192), "read")
	if !bytes.Equal(got, b) {
		t.Fatal("FUA write lost in a crash")
	}
	mustErrno(t, rc.errno(true, proto.Request{Type: proto.CmdFlush, Cookie: 3}, nil))
	mustf(t, m.CrashClone().ReadAt(t.Context(), got, 0), "read")
	if !bytes.Equal(got, a) {
		t.Fatal("flushed write lost in a crash")
	}
}

func mustErrno(t *testing.T, e proto.Errno) {
	t.Helper()
	if e != 0 {
		t.Fatalf("request failed: %v", e)
	}
}

// blockdev error classes map to NBD error values (package doc).
func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		err        error
		read, writ proto.Errno
	}{
		{blockdev.ErrFenced, proto.EPERM, proto.EPERM},
		{blockdev.ErrUnavailable, proto.EIO, proto.EIO},
		{blockdev.ErrCorrupt, proto.EIO, proto.EIO},
		{blockdev.ErrOutOfRange, proto.EINVAL, proto.ENOSPC},
		{blockdev.ErrNoSpace, proto.ENOSPC, proto.ENOSPC},
		{blockdev.ErrInvalid, proto.EINVAL, proto.EINVAL},
		{context.Canceled, proto.ESHUTDOWN, proto.ESHUTDOWN},
		{fmt.Errorf("disk on fire"), proto.EIO, proto.EIO},
	} {
		d := &errDev{Mem: newMem(t, 1<<20, 512), err: fmt.Errorf("wrapped: %w", tc.err)}
		_, addr := serve(t, Options{Exports: map[string]Export{"e": {Device: d}}, Logf: func(string, ...any) {}}, "tcp")
		rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
		rc.goExport("e", true)
		if got := rc.errno(true, proto.Request{Type: proto.CmdRead, Cookie: 1, Length: 512}, nil); got != tc.read {
			t.Errorf("%v on READ: %v, want %v", tc.err, got, tc.read)
		}
		if got := rc.errno(true, proto.Request{Type: proto.CmdWrite, Cookie: 2, Length: 512}, make([]byte, 512)); got != tc.writ {
			t.Errorf("%v on WRITE: %v, want %v", tc.err, got, tc.writ)
		}
	}
}

// FAST_ZERO succeeds on a FastZeroer that says so, and still zeroes.
func TestFastZero(t *testing.T) {
	m := newMem(t, 1<<20, 4096)
	mustf(t, m.WriteAt(t.Context(), testutil.Pattern(8192, 1), 0), "write")
	_, addr := serve(t, Options{Exports: map[string]Export{"f": {Device: fastZeroDev{m}}}}, "tcp")
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("f", false)
	z := proto.Request{Type: proto.CmdWriteZeroes, Flags: proto.CmdFlagFastZero, Cookie: 1, Length: 8192}
	mustErrno(t, rc.errno(false, z, nil))
	z.Flags |= proto.CmdFlagNoHole // the FastZeroer refuses when it may not trim
	if got := rc.errno(false, z, nil); got != proto.ENOTSUP {
		t.Fatalf("FAST_ZERO|NO_HOLE: %v", got)
	}
	got := make([]byte, 8192)
	mustf(t, m.ReadAt(t.Context(), got, 0), "read")
	if !bytes.Equal(got, make([]byte, 8192)) {
		t.Fatal("fast zero did not zero")
	}
}

// Unix sockets work like TCP; random IO from many requests in flight.
func TestUnixSocketRandomIO(t *testing.T) {
	const size = 4 << 20
	m := newMem(t, size, 4096)
	_, addr := serve(t, Options{Exports: map[string]Export{"u": {Device: m}}, MaxInFlight: 8}, "unix")
	rc := dialRaw(t, "unix", addr, fixedNoZeroes)
	rc.goExport("u", false)
	want := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	var batch []byte
	for i := range 200 {
		n := (1 + rng.IntN(64)) * 512
		off := rng.IntN(size/512-n/512) * 512
		p := testutil.Pattern(n, byte(i))
		copy(want[off:], p)
		batch = append(proto.AppendRequest(batch, proto.Request{Type: proto.CmdWrite, Cookie: uint64(i), Offset: uint64(off), Length: uint32(n)}), p...)
		// Overlapping writes in flight together complete in any order; send
		// each only after the previous one is answered.
		rc.write(batch)
		batch = batch[:0]
		mustErrno(t, func() proto.Errno { e, _, _ := rc.simple(0); return e }())
	}
	rc.send(proto.Request{Type: proto.CmdRead, Cookie: 999, Length: size}, nil)
	if e, _, got := rc.simple(size); e != 0 || !bytes.Equal(got, want) {
		t.Fatalf("read back over a unix socket: %v", e)
	}
}

// RemoveExport ends the export's connections and hides it.
func TestRemoveExport(t *testing.T) {
	a, b := newMem(t, 1<<20, 512), newMem(t, 1<<20, 512)
	s, addr := serve(t, Options{Exports: map[string]Export{"a": {Device: a}}}, "tcp")
	mustf(t, s.AddExport("b", Export{Device: b}), "add")
	if err := s.AddExport("b", Export{Device: b}); err == nil {
		t.Fatal("duplicate export accepted")
	}
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("b", false)
	mustf(t, s.RemoveExport("b"), "remove")
	rc.expectClosed()
	rc = dialRaw(t, "tcp", addr, fixedNoZeroes)
	if r := rc.option(proto.OptGo, proto.AppendInfoRequest(nil, proto.InfoRequest{Name: "b"})); r[0].typ != proto.RepErrUnknown {
		t.Fatalf("GO removed export: %v", r[0].typ)
	}
	rc.goExport("a", false)
}

func TestOptionsValidate(t *testing.T) {
	m := newMem(t, 1<<20, 512)
	for name, o := range map[string]Options{
		"max request too small": {MaxRequest: 4096},
		"max request unaligned": {MaxRequest: 1<<20 + 512},
		"empty name":            {Exports: map[string]Export{"": {Device: m}}},
		"nil device":            {Exports: map[string]Export{"x": {}}},
		"unknown default":       {Exports: map[string]Export{"x": {Device: m}}, DefaultExport: "y"},
		"negative grace":        {ShutdownGrace: -1},
	} {
		if _, err := NewServer(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s, err := NewServer(Options{})
	mustf(t, err, "empty options")
	s.Close()
	if err := s.AddExport("x", Export{Device: m}); err == nil {
		t.Error("AddExport after Close accepted")
	}
}

// With a tiny ReplyBacklog, READs wait for the replies ahead of them to be
// written; a client that sends many READs before reading any reply still
// gets every one, with the right data.
func TestReplyBacklog(t *testing.T) {
	const size, n, each = 8 << 20, 64, 64 << 10
	m := newMem(t, size, 4096)
	want := testutil.Pattern(size, 3)
	mustf(t, m.WriteAt(t.Context(), want, 0), "fill")
	_, addr := serve(t, Options{Exports: map[string]Export{"b": {Device: m}}, MaxInFlight: 32, ReplyBacklog: 4096}, "tcp")
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("b", false)
	var batch []byte
	for i := range n {
		batch = proto.AppendRequest(batch, proto.Request{Type: proto.CmdRead, Cookie: uint64(i), Offset: uint64(i * each), Length: each})
	}
	rc.write(batch)
	seen := map[uint64]bool{}
	for range n {
		e, cookie, got := rc.simple(each)
		if e != 0 || seen[cookie] || cookie >= n {
			t.Fatalf("reply errno %v cookie %d (seen %v)", e, cookie, seen[cookie])
		}
		seen[cookie] = true
		if off := int(cookie) * each; !bytes.Equal(got, want[off:off+each]) {
			t.Fatalf("READ %d: wrong data", cookie)
		}
	}
}

// Under structured replies, a successful command other than READ gets a
// simple reply; a READ (even of zero bytes) gets chunks, and a failure an
// ERROR chunk that carries a message.
func TestReplyFormUnderStructured(t *testing.T) {
	m := newMem(t, 1<<20, 4096)
	_, addr := serve(t, Options{Exports: map[string]Export{"m": {Device: m}}}, "tcp")
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("m", true)
	type R = proto.Request
	for _, tc := range []struct {
		req     R
		payload []byte
	}{
		{R{Type: proto.CmdWrite, Cookie: 1, Length: 4096}, testutil.Pattern(4096, 1)},
		{R{Type: proto.CmdWrite, Flags: proto.CmdFlagFUA, Cookie: 2, Offset: 4096, Length: 4096}, testutil.Pattern(4096, 2)},
		{R{Type: proto.CmdFlush, Cookie: 3}, nil},
		{R{Type: proto.CmdTrim, Cookie: 4, Length: 4096}, nil},
		{R{Type: proto.CmdWriteZeroes, Cookie: 5, Offset: 8192, Length: 4096}, nil},
		{R{Type: proto.CmdCache, Cookie: 6, Length: 4096}, nil},
	} {
		rc.send(tc.req, tc.payload)
		if c := rc.chunk(); !c.simple || c.errno != 0 || c.Cookie != tc.req.Cookie {
			t.Fatalf("%v: got %+v, want a successful simple reply for cookie %d", tc.req.Type, c, tc.req.Cookie)
		}
	}
	rc.send(R{Type: proto.CmdRead, Cookie: 7}, nil)
	if c := rc.chunk(); c.simple || c.Type != proto.ChunkNone || c.Flags&proto.ReplyFlagDone == 0 {
		t.Fatalf("zero-length READ: got %+v, want a NONE chunk with DONE", c)
	}
	rc.send(R{Type: proto.CmdRead, Cookie: 8, Offset: 4096, Length: 4096}, nil)
	cs := rc.structured(8)
	if len(cs) != 1 || cs[0].simple || cs[0].Type != proto.ChunkOffsetData || !bytes.Equal(cs[0].payload[8:], testutil.Pattern(4096, 2)) {
		t.Fatalf("READ: got %d chunks (%+v), want one OFFSET_DATA with the written data", len(cs), cs[0].ChunkHeader)
	}
	rc.send(R{Type: proto.CmdWrite, Cookie: 9, Offset: 1 << 20, Length: 4096}, testutil.Pattern(4096, 3))
	c := rc.chunk()
	if c.simple || c.Type != proto.ChunkError {
		t.Fatalf("WRITE past the end: got %+v, want an ERROR chunk", c)
	}
	e, err := proto.ParseErrorPayload(c.Type, c.payload)
	if err != nil || e.Errno != proto.ENOSPC || !strings.Contains(e.Message, "past the end") {
		t.Fatalf("WRITE past the end: %+v, %v; want ENOSPC with a message", e, err)
	}
}
