package nbd

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// trickle writes a byte to nc every 10 ms until stop closes or a write
// fails: a sender slow enough to hold a WRITE's payload buffer for days.
func trickle(nc net.Conn, stop <-chan struct{}) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if _, err := nc.Write([]byte{0}); err != nil {
				return
			}
		}
	}
}

// TestSlowPayloadWriters: 32 connections from 127.0.0.2..5 each send a
// maximum-size WRITE header and trickle its payload. Each used to hold a
// payload buffer for as long as it liked (at 32 MiB a request, the attack
// grew a mapping from 65 MiB to 4 GiB). Now the payload memory held stays
// within MaxPayloadMemory, every one of them is dropped and counted, the
// memory goes back, and a client then writes and reads as before.
func TestSlowPayloadWriters(t *testing.T) {
	const maxReq, conns = 1 << 20, 32
	m := newMem(t, 4<<20, 512)
	s, addr := serve(t, Options{MaxRequest: maxReq, MaxPayloadMemory: 4 * maxReq, RequestTimeout: time.Second,
		MinPayloadRate: 16 << 20, Logf: func(string, ...any) {}, Exports: map[string]Export{"mem": {Device: m}}}, "tcp")
	var slow []*rawClient
	for i := range conns {
		rc := dialRawFrom(t, fmt.Sprintf("127.0.0.%d", 2+i%4), addr, fixedNoZeroes)
		rc.goExport("mem", false)
		rc.send(proto.Request{Type: proto.CmdWrite, Cookie: 1, Length: maxReq}, make([]byte, 100))
		slow = append(slow, rc)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, rc := range slow {
		wg.Go(func() { trickle(rc.c, stop) })
	}
	for _, rc := range slow {
		rc.expectClosed()
	}
	close(stop)
	wg.Wait()
	st := s.Stats()
	if n := st.Refused[DroppedRequestTimeout] + st.Refused[DroppedPayloadMemory]; n != conns {
		t.Errorf("stats %+v: %d slow writers counted dropped, want %d", st, n, conns)
	}
	if st.PayloadBytesPeak == 0 || st.PayloadBytesPeak > 4*maxReq || st.PayloadBytes != 0 {
		t.Fatalf("payload memory: peak %d (want 1..%d), %d held after the drops (want 0)", st.PayloadBytesPeak, 4*maxReq, st.PayloadBytes)
	}
	rc := dialRawFrom(t, "127.0.0.6", addr, fixedNoZeroes)
	rc.goExport("mem", false)
	data := testutil.Pattern(maxReq, 4)
	rc.send(proto.Request{Type: proto.CmdWrite, Cookie: 2, Length: maxReq}, data)
	if e, _, _ := rc.simple(0); e != 0 {
		t.Fatalf("write after the slow writers: errno %v", e)
	}
	rc.send(proto.Request{Type: proto.CmdRead, Cookie: 3, Length: maxReq}, nil)
	if e, _, got := rc.simple(maxReq); e != 0 || !bytes.Equal(got, data) {
		t.Fatalf("read back: errno %v, equal %t", e, bytes.Equal(got, data))
	}
}

// TestIdleBetweenRequests: a connection may stay idle between requests far
// longer than RequestTimeout (the kernel's nbd driver does) and send a
// request in pieces within it; a request header that stops half way is
// dropped and counted.
func TestIdleBetweenRequests(t *testing.T) {
	m := newMem(t, 1<<20, 512)
	s, addr := serve(t, Options{RequestTimeout: 300 * time.Millisecond, Exports: map[string]Export{"mem": {Device: m}}}, "tcp")
	rc := dialRaw(t, "tcp", addr, fixedNoZeroes)
	rc.goExport("mem", false)
	time.Sleep(time.Second) // idle: over 3 x RequestTimeout
	data := testutil.Pattern(4096, 5)
	msg := append(proto.AppendRequest(nil, proto.Request{Type: proto.CmdWrite, Cookie: 1, Length: 4096}), data...)
	rc.write(msg[:10])
	rc.write(msg[10:])
	if e, cookie, _ := rc.simple(0); e != 0 || cookie != 1 {
		t.Fatalf("write after idling: errno %v, cookie %d", e, cookie)
	}
	time.Sleep(time.Second)
	rc.send(proto.Request{Type: proto.CmdRead, Cookie: 2, Length: 4096}, nil)
	if e, _, got := rc.simple(4096); e != 0 || !bytes.Equal(got, data) {
		t.Fatalf("read after idling: errno %v, equal %t", e, bytes.Equal(got, data))
	}
	rc.write(proto.AppendRequest(nil, proto.Request{Type: proto.CmdRead, Cookie: 3, Length: 4096})[:10])
	rc.expectClosed()
	if n := s.Stats().Refused[DroppedRequestTimeout]; n != 1 {
		t.Fatalf("%d connections counted for %s, want 1", n, DroppedRequestTimeout)
	}
}

// TestSlowReaders: 8 connections from 127.0.0.2..5 each send four
// maximum-size READs and never read a reply. Each used to pin a reply's
// data for as long as it stayed connected (32 MiB a connection at the
// defaults). Now the data held stays within MaxPayloadMemory, the
// connections whose replies stall are dropped and counted, and all the
// memory goes back.
func TestSlowReaders(t *testing.T) {
	const maxReq, conns = 4 << 20, 8
	m := newMem(t, 8<<20, 512)
	s, addr := serve(t, Options{MaxRequest: maxReq, MaxPayloadMemory: 2 * maxReq, RequestTimeout: time.Second,
		MinPayloadRate: 16 << 20, LoopbackSendBuffer: 64 << 10, Logf: func(string, ...any) {},
		Exports: map[string]Export{"mem": {Device: m}}}, "tcp")
	for i := range conns {
		rc := dialRawFrom(t, fmt.Sprintf("127.0.0.%d", 2+i%4), addr, fixedNoZeroes)
		rc.c.(*net.TCPConn).SetReadBuffer(4 << 10)
		rc.goExport("mem", false)
		for j := range 4 {
			rc.send(proto.Request{Type: proto.CmdRead, Cookie: uint64(j), Length: maxReq}, nil)
		}
	}
	// The server reads the requests after the sends return: no data is
	// held yet at first. Wait for a drop and all the data back.
	testutil.WaitFor(t, "stalled replies dropped and their data back", func() bool {
		st := s.Stats()
		return st.Refused[DroppedReplyTimeout] > 0 && st.PayloadBytes == 0
	})
	st := s.Stats()
	if st.PayloadBytes != 0 || st.PayloadBytesPeak == 0 || st.PayloadBytesPeak > 2*maxReq {
		t.Fatalf("read data: %d bytes held (want 0), peak %d (want 1..%d)", st.PayloadBytes, st.PayloadBytesPeak, 2*maxReq)
	}
	if st.Refused[DroppedReplyTimeout] == 0 {
		t.Fatalf("stats %+v: no connection dropped for %s", st, DroppedReplyTimeout)
	}
}
