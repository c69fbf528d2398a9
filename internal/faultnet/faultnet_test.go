package faultnet

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// echo serves an echo server and records what it received.
type echo struct {
	ln  net.Listener
	mu  sync.Mutex
	got bytes.Buffer
}

func startEcho(t *testing.T) *echo {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
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
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return e
}

func (e *echo) received() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.got.String()
}

func roundTrip(t *testing.T, c net.Conn, s string, wait time.Duration) (string, error) {
	t.Helper()
	if _, err := c.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	b := make([]byte, len(s))
	_, err := io.ReadFull(c, b)
	return string(b), err
}

func TestProxyStallResumeReset(t *testing.T) {
	e := startEcho(t)
	p, err := New(e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(t, c, "one", 10*time.Second); got != "one" || err != nil {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	p.Stall()
	if got, err := roundTrip(t, c, "two", 100*time.Millisecond); err == nil {
		t.Fatalf("stalled proxy passed %q", got)
	}
	p.Resume()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 3)
	if _, err := io.ReadFull(c, b); string(b) != "two" {
		t.Fatalf("after Resume: %q, %v", b, err)
	}
	p.Reset()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(b); err == nil {
		t.Fatalf("after Reset read %d bytes", n)
	}
}

func TestProxyStallAfter(t *testing.T) {
	e := startEcho(t)
	p, err := New(e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.StallAfter([]byte("MARK"))
	if got, err := roundTrip(t, c, "a", 10*time.Second); got != "a" || err != nil {
		t.Fatalf("before the mark: %q, %v", got, err)
	}
	if _, err := roundTrip(t, c, "xMARKy", 100*time.Millisecond); err == nil {
		t.Fatal("the reply to the marked request came through")
	}
	if !p.Stalled() {
		t.Fatal("not stalled after the mark")
	}
	for deadline := time.Now().Add(10 * time.Second); e.received() != "axMARKy"; {
		if time.Now().After(deadline) {
			t.Fatalf("server received %q, want the marked request too", e.received())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProxyPartitionHeal(t *testing.T) {
	e := startEcho(t)
	p, err := New(e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(t, c, "one", 10*time.Second); got != "one" || err != nil {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	p.Partition()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 3)
	if n, err := c.Read(b); err == nil {
		t.Fatalf("open connection read %d bytes across the partition", n)
	}
	// A new connection is accepted by the listener and closed at once.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, err := roundTrip(t, c2, "two", 10*time.Second); err == nil {
		t.Fatalf("new connection passed %q across the partition", got)
	}
	p.Heal()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(t, c3, "three", 10*time.Second); got != "three" || err != nil {
		t.Fatalf("after Heal: %q, %v", got, err)
	}
}

func TestProxyDelay(t *testing.T) {
	e := startEcho(t)
	p, err := New(e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.Delay(time.Second)
	// The echo comes back through two delayed hops: not within 500 ms,
	// but it does come.
	if got, err := roundTrip(t, c, "slow", 500*time.Millisecond); err == nil {
		t.Fatalf("delayed proxy answered %q at once", got)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); string(b) != "slow" {
		t.Fatalf("after the delay: %q, %v", b, err)
	}
	p.Heal()
	if got, err := roundTrip(t, c, "fast", 10*time.Second); got != "fast" || err != nil {
		t.Fatalf("after Heal: %q, %v", got, err)
	}
}
