package nbd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/accept"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// emfileListener fails its first N Accept calls with EMFILE.
type emfileListener = testutil.EMFILEListener

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
	l.N.Store(5)
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), l) }()
	rc := dialRaw(t, "tcp", inner.Addr().String(), fixedNoZeroes)
	if size, _ := rc.goExport("mem", false); size != 1<<20 {
		t.Fatalf("export size %d", size)
	}
	if c := l.Calls.Load(); c < 6 {
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
	s, addr := serve(t, Options{MaxConnections: 1, Exports: map[string]Export{"mem": {Device: m}}}, "tcp")
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
	if n := s.Stats().Refused[accept.RefusedMaxConnections]; n != 1 {
		t.Fatalf("%d refusals for %s counted, want 1", n, accept.RefusedMaxConnections)
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

// greetedFrom dials addr from the local address from (the whole 127/8 is
// this host) and says whether the server greeted it (false: closed
// without a greeting).
func greetedFrom(t *testing.T, from, addr string) (net.Conn, bool) {
	t.Helper()
	nc := testutil.DialFrom(t, from, addr)
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	g := make([]byte, proto.GreetingSize)
	if _, err := io.ReadFull(nc, g); err != nil {
		if isTimeout(err) {
			t.Fatalf("connection from %s neither greeted nor closed: %v", from, err)
		}
		return nc, false
	}
	return nc, true
}

// TestServeCapsConnectionsPerIP: with MaxConnectionsPerIP 2 the third
// connection from 127.0.0.1 is closed before the greeting, logged and
// counted, while 127.0.0.2 is still served; once one of 127.0.0.1's
// connections ends it is served again.
func TestServeCapsConnectionsPerIP(t *testing.T) {
	m := newMem(t, 1<<20, 512)
	var logs testutil.Buffer
	s, addr := serve(t, Options{MaxConnectionsPerIP: 2, Logf: logs.Logf, Exports: map[string]Export{"mem": {Device: m}}}, "tcp")
	a, okA := greetedFrom(t, "127.0.0.1", addr)
	_, okB := greetedFrom(t, "127.0.0.1", addr)
	if !okA || !okB {
		t.Fatal("the first two connections from 127.0.0.1 were not greeted")
	}
	if _, ok := greetedFrom(t, "127.0.0.1", addr); ok {
		t.Fatal("a third connection from 127.0.0.1 was greeted beyond MaxConnectionsPerIP 2")
	}
	if _, ok := greetedFrom(t, "127.0.0.2", addr); !ok {
		t.Fatal("127.0.0.2 was refused: the cap is per address")
	}
	st := s.Stats()
	if st.Refused[accept.RefusedPerIP] != 1 || st.Refused[accept.RefusedMaxConnections] != 0 || st.Connections != 3 {
		t.Fatalf("stats %+v: want 1 refusal for %s and 3 connections", st, accept.RefusedPerIP)
	}
	if !strings.Contains(logs.String(), "refusing connection from 127.0.0.1:") {
		t.Fatalf("the refusal was not logged:\n%s", logs.String())
	}
	a.Close()
	testutil.WaitFor(t, "127.0.0.1 served again after one of its connections closed", func() bool {
		nc, ok := greetedFrom(t, "127.0.0.1", addr)
		nc.Close()
		return ok
	})
}

// TestSilentClientDropped: a client that connects and never sends a byte
// (a slowloris) is closed after HandshakeTimeout, freeing its place, and
// counted as a handshake timeout.
func TestSilentClientDropped(t *testing.T) {
	m := newMem(t, 1<<20, 512)
	s, addr := serve(t, Options{HandshakeTimeout: 100 * time.Millisecond, Exports: map[string]Export{"mem": {Device: m}}}, "tcp")
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(nc)
	if isTimeout(err) {
		t.Fatalf("a silent client was not closed: %v", err)
	}
	if len(b) != proto.GreetingSize {
		t.Fatalf("read %d bytes before the close, want the %d-byte greeting", len(b), proto.GreetingSize)
	}
	st := s.Stats()
	if st.Refused[accept.RefusedHandshake] != 1 || st.Connections != 0 {
		t.Fatalf("stats %+v: want 1 refusal for %s and no connection", st, accept.RefusedHandshake)
	}
}

// clientFrom completes a handshake for export from the local address from
// and returns the client.
func clientFrom(t *testing.T, from, addr, export string) (*nbdtest.Client, error) {
	t.Helper()
	nc := testutil.DialFrom(t, from, addr)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := nbdtest.NewClient(ctx, nc, export)
	if err != nil {
		nc.Close()
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

// TestHandshakeFlood: 500 connections from 127.0.0.2..5 that stall after
// the greeting (default options) used to take all 128 places for the 30 s
// handshake timeout, and a client from 127.0.0.6 was closed unanswered.
// Now each address holds MaxHandshakesPerIP handshakes, the rest are
// closed at once and counted, and the client's handshake and IO succeed.
func TestHandshakeFlood(t *testing.T) {
	m := newMem(t, 1<<20, 512)
	s, addr := serve(t, Options{Logf: func(string, ...any) {}, Exports: map[string]Export{"mem": {Device: m}}}, "tcp")
	greeted := 0
	for i := range 500 {
		if _, ok := greetedFrom(t, fmt.Sprintf("127.0.0.%d", 2+i%4), addr); ok {
			greeted++
		}
	}
	c, err := clientFrom(t, "127.0.0.6", addr, "mem")
	if err != nil {
		t.Fatalf("client from 127.0.0.6 during the flood: %v (stats %+v)", err, s.Stats())
	}
	data := testutil.Pattern(4096, 9)
	got := make([]byte, 4096)
	if err := c.WriteAt(t.Context(), data, 4096); err != nil {
		t.Fatal(err)
	}
	if err := c.ReadAt(t.Context(), got, 4096); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back during the flood: %v, equal %t", err, bytes.Equal(got, data))
	}
	st := s.Stats()
	if greeted != 4*DefaultMaxHandshakesIP || st.Refused[accept.RefusedPendingPerIP] != uint64(500-greeted) {
		t.Fatalf("%d of the flood greeted, stats %+v: want %d greeted and the rest refused for %s",
			greeted, st, 4*DefaultMaxHandshakesIP, accept.RefusedPendingPerIP)
	}
}

// TestHandshakeEviction: with MaxHandshakes 4 full of stalled handshakes
// from four addresses, a client from a fifth completes its handshake; the
// oldest stalled connection is closed to make room and counted.
func TestHandshakeEviction(t *testing.T) {
	m := newMem(t, 1<<20, 512)
	s, addr := serve(t, Options{MaxHandshakes: 4, Exports: map[string]Export{"mem": {Device: m}}}, "tcp")
	var stalled []net.Conn
	for i := range 4 {
		nc, ok := greetedFrom(t, fmt.Sprintf("127.0.0.%d", 2+i), addr)
		if !ok {
			t.Fatalf("stalled connection %d refused below MaxHandshakes", i+1)
		}
		stalled = append(stalled, nc)
	}
	if _, err := clientFrom(t, "127.0.0.6", addr, "mem"); err != nil {
		t.Fatalf("client with MaxHandshakes full of stalled handshakes: %v", err)
	}
	if b, err := io.ReadAll(stalled[0]); len(b) != 0 || isTimeout(err) {
		t.Fatalf("the oldest stalled connection read %d bytes, %v: want it closed", len(b), err)
	}
	// The newcomer's handshake closes the oldest connection; that
	// connection's own goroutine then ends, and only then is it uncounted.
	waitConns(t, s, 4)
	st := s.Stats()
	if st.Refused[accept.RefusedPendingEvicted] != 1 || st.Connections != 4 {
		t.Fatalf("stats %+v: want 1 %s and 4 connections", st, accept.RefusedPendingEvicted)
	}
}
