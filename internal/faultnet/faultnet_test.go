package faultnet

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// echo serves an echo server and records what it received.
type echo struct {
	addr string
	mu   sync.Mutex
	got  bytes.Buffer
}

func startEcho(t *testing.T) *echo {
	e := &echo{}
	e.addr = testutil.Serve(t, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 1024)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				e.mu.Lock()
				e.got.Write(buf[:n])
				e.mu.Unlock()
				c.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	})
	return e
}

func (e *echo) received() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.got.String()
}

// newProxy starts an echo server behind a Proxy; the proxy is closed at
// t's cleanup.
func newProxy(t *testing.T) (*echo, *Proxy) {
	t.Helper()
	e := startEcho(t)
	p, err := New(e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return e, p
}

// proxied is newProxy with a connection through the proxy.
func proxied(t *testing.T) (*echo, *Proxy, net.Conn) {
	t.Helper()
	e, p := newProxy(t)
	return e, p, dial(t, p)
}

// dial connects to the proxy; the connection is closed at t's cleanup.
func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func roundTrip(t *testing.T, c net.Conn, s string, wait time.Duration) (string, error) {
	t.Helper()
	if _, err := c.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	return readBack(c, len(s), wait)
}

// readBack reads n bytes from c, waiting at most wait.
func readBack(c net.Conn, n int, wait time.Duration) (string, error) {
	c.SetReadDeadline(time.Now().Add(wait))
	b := make([]byte, n)
	_, err := io.ReadFull(c, b)
	return string(b), err
}

// mustPass checks that c round-trips s.
func mustPass(t *testing.T, c net.Conn, s, when string) {
	t.Helper()
	if got, err := roundTrip(t, c, s, 10*time.Second); got != s || err != nil {
		t.Fatalf("%s: %q, %v", when, got, err)
	}
}

func TestProxyStallResumeReset(t *testing.T) {
	_, p, c := proxied(t)
	mustPass(t, c, "one", "through the proxy")
	p.Stall()
	if got, err := roundTrip(t, c, "two", 100*time.Millisecond); err == nil {
		t.Fatalf("stalled proxy passed %q", got)
	}
	p.Resume()
	if got, err := readBack(c, 3, 10*time.Second); got != "two" {
		t.Fatalf("after Resume: %q, %v", got, err)
	}
	p.Reset()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 3)); err == nil {
		t.Fatalf("after Reset read %d bytes", n)
	}
}

func TestProxyStallAfter(t *testing.T) {
	e, p, c := proxied(t)
	p.StallAfter([]byte("MARK"))
	mustPass(t, c, "a", "before the mark")
	if _, err := roundTrip(t, c, "xMARKy", 100*time.Millisecond); err == nil {
		t.Fatal("the reply to the marked request came through")
	}
	if !p.Stalled() {
		t.Fatal("not stalled after the mark")
	}
	testutil.WaitFor(t, "the server to receive the marked request", func() bool {
		return e.received() == "axMARKy"
	})
}

func TestProxyPartitionHeal(t *testing.T) {
	_, p, c := proxied(t)
	mustPass(t, c, "one", "through the proxy")
	p.Partition()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 3)); err == nil {
		t.Fatalf("open connection read %d bytes across the partition", n)
	}
	// A new connection is accepted by the listener and closed at once.
	if got, err := roundTrip(t, dial(t, p), "two", 10*time.Second); err == nil {
		t.Fatalf("new connection passed %q across the partition", got)
	}
	p.Heal()
	mustPass(t, dial(t, p), "three", "after Heal")
}

func TestProxyDelay(t *testing.T) {
	_, p, c := proxied(t)
	p.Delay(time.Second)
	// The echo comes back through two delayed hops: not within 500 ms,
	// but it does come.
	if got, err := roundTrip(t, c, "slow", 500*time.Millisecond); err == nil {
		t.Fatalf("delayed proxy answered %q at once", got)
	}
	if got, err := readBack(c, 4, 10*time.Second); got != "slow" {
		t.Fatalf("after the delay: %q, %v", got, err)
	}
	p.Heal()
	mustPass(t, c, "fast", "after Heal")
}
