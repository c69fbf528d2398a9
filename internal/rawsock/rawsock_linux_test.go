package rawsock

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// TestWritevPartial writes more than the socket buffer holds, in
// more pieces than one writev takes, to a slow reader: every byte arrives,
// in order.
func TestWritevPartial(t *testing.T) {
	a, b := testutil.TCPPair(t)
	raw := New(a)
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
	if err := raw.Writev(bufs); err != nil {
		t.Fatal(err)
	}
	if g := <-got; !bytes.Equal(g, want) {
		t.Fatalf("received %d bytes, want %d, equal %v", len(g), len(want), bytes.Equal(g, want))
	}
}

// TestRead reads what the peer sent, then EOF when it closes; a
// deadline in the past interrupts a waiting read.
func TestRead(t *testing.T) {
	a, b := testutil.TCPPair(t)
	raw := New(a)
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
	if err := raw.Writev([][]byte{[]byte("x")}); err == nil {
		t.Fatal("writev on a closed socket succeeded")
	}
}

// TestReadv: the bytes fill p first, then spill; a short p takes what
// follows into spill in the same call; the peer's close is io.EOF.
func TestReadv(t *testing.T) {
	a, b := testutil.TCPPair(t)
	raw := New(a)
	msg := []byte("0123456789abcdef")
	if _, err := b.Write(msg); err != nil {
		t.Fatal(err)
	}
	p, spill := make([]byte, 10), make([]byte, 64)
	got := 0
	for got < len(msg) { // loopback delivers the write whole, but a read may be short
		n, err := raw.Readv(p[min(got, len(p)):], spill[max(0, got-len(p)):])
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	if got != len(msg) || string(p) != "0123456789" || string(spill[:6]) != "abcdef" {
		t.Fatalf("readv got %d bytes: p %q spill %q", got, p, spill[:6])
	}
	b.Close()
	if n, err := raw.Readv(p, spill); n != 0 || err != io.EOF {
		t.Fatalf("readv after the peer closed: %d, %v; want 0, EOF", n, err)
	}
}
