package nbd

import (
	"context"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/nbd/proto"
)

// emfileListener fails its first n Accept calls with EMFILE.
type emfileListener struct {
	net.Listener
	n     atomic.Int32
	calls atomic.Int32
}

func (l *emfileListener) Accept() (net.Conn, error) {
	l.calls.Add(1)
	if l.n.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestServeSurvivesEMFILE: a listener out of descriptors keeps serving once
// they are back, where Serve used to return and leave the port dead.
func TestServeSurvivesEMFILE(t *testing.T) {
	checkGoroutines(t)
	m := newMem(t, 1<<20, 512)
	s, err := NewServer(Options{Logf: t.Logf, Exports: map[string]Export{"mem": {Device: m}}})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &emfileListener{Listener: inner}
	l.n.Store(5)
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), l) }()
	rc := dialRaw(t, "tcp", inner.Addr().String(), fixedNoZeroes)
	if size, _ := rc.goExport("mem", false); size != 1<<20 {
		t.Fatalf("export size %d", size)
	}
	if c := l.calls.Load(); c < 6 {
		t.Fatalf("Accept called %d times, want 5 failures then a success", c)
	}
	rc.c.Close()
	s.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// TestServeCapsConnections: with MaxConnections 1 a second client is
// closed before the greeting.
func TestServeCapsConnections(t *testing.T) {
	m := newMem(t, 1<<20, 512)
	_, addr := serve(t, Options{MaxConnections: 1, Exports: map[string]Export{"mem": {Device: m}}}, "tcp")
	dialRaw(t, "tcp", addr, fixedNoZeroes)
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(20 * time.Second))
	if b, err := io.ReadAll(extra); len(b) != 0 || isTimeout(err) {
		t.Fatalf("second connection read %d bytes, %v: want closed without a greeting", len(b), err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestStalledHandshake: a client that stops in the middle of the option
// haggling is closed after HandshakeTimeout; one in transmission is not.
func TestStalledHandshake(t *testing.T) {
	m := newMem(t, 1<<20, 512)
	_, addr := serve(t, Options{HandshakeTimeout: 100 * time.Millisecond, Exports: map[string]Export{"mem": {Device: m}}}, "tcp")
	flags := fixedNoZeroes
	served := dialRaw(t, "tcp", addr, flags)
	served.goExport("mem", false)

	stalled := dialRaw(t, "tcp", addr, flags)
	stalled.expectClosed()

	served.send(proto.Request{Type: proto.CmdRead, Cookie: 7, Offset: 0, Length: 512}, nil)
	if errno, cookie, _ := served.simple(512); errno != 0 || cookie != 7 {
		t.Fatalf("read after the stalled client was closed: errno %v cookie %d", errno, cookie)
	}
}
