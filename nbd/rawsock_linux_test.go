package nbd

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		acc <- c
	}()
	a, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-acc
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestRawSockWritevPartial writes more than the socket buffer holds, in
// more pieces than one writev takes, to a slow reader: every byte arrives,
// in order.
func TestRawSockWritevPartial(t *testing.T) {
	a, b := tcpPair(t)
	raw := newRawSock(a)
	if raw == nil {
		t.Fatal("no raw socket for a TCP connection")
	}
	rng := rand.New(rand.NewSource(1))
	var bufs [][]byte
	var want []byte
	for range 3000 { // over maxIov pieces, about 12 MiB
		p := make([]byte, rng.Intn(8192))
		rng.Read(p)
		bufs = append(bufs, p)
		want = append(want, p...)
	}
	got := make(chan []byte, 1)
	go func() {
		var all []byte
		buf := make([]byte, 64<<10)
		for len(all) < len(want) {
			n, err := b.Read(buf)
			all = append(all, buf[:n]...)
			if err != nil {
				break
			}
			if len(all) < 1<<20 {
				time.Sleep(time.Millisecond) // slow at first: the sender waits for room
			}
		}
		got <- all
	}()
	if err := raw.writev(bufs); err != nil {
		t.Fatal(err)
	}
	if g := <-got; !bytes.Equal(g, want) {
		t.Fatalf("received %d bytes, want %d, equal %v", len(g), len(want), bytes.Equal(g, want))
	}
}

// TestRawSockRead reads what the peer sent, then EOF when it closes; a
// deadline in the past interrupts a waiting read.
func TestRawSockRead(t *testing.T) {
	a, b := tcpPair(t)
	raw := newRawSock(a)
	if _, err := b.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := io.ReadAtLeast(raw, buf, 5); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	time.AfterFunc(50*time.Millisecond, func() { a.SetReadDeadline(time.Unix(1, 0)) })
	if _, err := raw.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a deadline error", err)
	}
	a.SetReadDeadline(time.Time{})
	b.Close()
	if n, err := raw.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read after the peer closed: %d, %v; want 0, EOF", n, err)
	}
	a.Close()
	if err := raw.writev([][]byte{[]byte("x")}); err == nil {
		t.Fatal("writev on a closed socket succeeded")
	}
}

// TestLoopbackSendBuffer: a connection from a loopback client gets the
// configured send buffer (Linux doubles it, within net.core.wmem_max); a
// negative setting leaves the kernel's.
func TestLoopbackSendBuffer(t *testing.T) {
	raw, err := os.ReadFile("/proc/sys/net/core/wmem_max")
	if err != nil {
		t.Skipf("cannot read net.core.wmem_max: %v", err)
	}
	wmemMax, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		set, want int
	}{
		{256 << 10, 2 * min(256<<10, wmemMax)},
		{-1, 0}, // unchanged: compared with an untuned socket below
	} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cc, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		sc, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		before := sndbuf(t, sc)
		tuneSocket(sc, Options{LoopbackSendBuffer: c.set})
		got := sndbuf(t, sc)
		if c.want == 0 {
			c.want = before
		}
		if got != c.want {
			t.Errorf("LoopbackSendBuffer %d: SO_SNDBUF %d, want %d", c.set, got, c.want)
		}
		cc.Close()
		sc.Close()
		l.Close()
	}
}

func sndbuf(t *testing.T, nc net.Conn) int {
	t.Helper()
	rc, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var serr error
	if err := rc.Control(func(fd uintptr) { v, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	return v
}
