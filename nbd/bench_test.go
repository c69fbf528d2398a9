package nbd

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/nvstripe/nvstripe/internal/rawsock"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// benchIO drives b.N requests of n bytes with qd in flight over loopback TCP
// (simple replies) against a Mem export, and reports bytes per second.
func benchIO(b *testing.B, cmd proto.Cmd, n, qd int, random bool) {
	const size = 256 << 20
	m, err := newBenchMem(size)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	s, err := NewServer(Options{Exports: map[string]Export{"m": {Device: m}}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("tcp", testutil.ServeListener(b, s.Serve))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReaderSize(c, 1<<20)
	handshake(b, c, br)
	payload := make([]byte, n)
	m.WriteAt(b.Context(), make([]byte, size), 0) // allocate every page
	slots := make(chan struct{}, qd)
	done := make(chan error, 1)
	go func() { done <- readReplies(br, b.N, cmd, n, slots) }()
	b.SetBytes(int64(n))
	b.ResetTimer()
	bw := bufio.NewWriterSize(c, 4<<20)
	for i := range b.N {
		slots <- struct{}{}
		off := uint64(i*n) % size
		if random {
			off = uint64(i*7919*n) % size
		}
		req := proto.AppendRequest(nil, proto.Request{Type: cmd, Cookie: uint64(i), Offset: off, Length: uint32(n)})
		bw.Write(req)
		if cmd == proto.CmdWrite {
			bw.Write(payload)
		}
		if len(slots) == qd || i == b.N-1 {
			bw.Flush()
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

func readReplies(br *bufio.Reader, count int, cmd proto.Cmd, n int, slots chan struct{}) error {
	hdr := make([]byte, proto.SimpleReplySize)
	for range count {
		if _, err := io.ReadFull(br, hdr); err != nil {
			return err
		}
		if errno, _, err := proto.ParseSimpleReply(hdr); err != nil || errno != 0 {
			return fmt.Errorf("reply %v %v", errno, err)
		}
		if cmd == proto.CmdRead {
			if _, err := br.Discard(n); err != nil {
				return err
			}
		}
		<-slots
	}
	return nil
}

func handshake(b *testing.B, c net.Conn, br *bufio.Reader) {
	g := make([]byte, proto.GreetingSize)
	io.ReadFull(br, g)
	msg := proto.AppendClientFlags(nil, proto.FlagCFixedNewstyle|proto.FlagCNoZeroes)
	msg = proto.AppendOption(msg, proto.OptGo, proto.AppendInfoRequest(nil, proto.InfoRequest{Name: "m"}))
	c.Write(msg)
	for {
		h := make([]byte, proto.OptionReplyHeaderSize)
		if _, err := io.ReadFull(br, h); err != nil {
			b.Fatal(err)
		}
		oh, err := proto.ParseOptionReplyHeader(h)
		if err != nil {
			b.Fatal(err)
		}
		br.Discard(int(oh.Length))
		if oh.Type == proto.RepAck {
			return
		}
		if oh.Type.IsError() {
			b.Fatalf("GO: %v", oh.Type)
		}
	}
}

func BenchmarkRead_1M_QD16(b *testing.B)      { benchIO(b, proto.CmdRead, 1<<20, 16, false) }
func BenchmarkWrite_1M_QD16(b *testing.B)     { benchIO(b, proto.CmdWrite, 1<<20, 16, false) }
func BenchmarkRandRead_4K_QD32(b *testing.B)  { benchIO(b, proto.CmdRead, 4096, 32, true) }
func BenchmarkRandRead_4K_QD1(b *testing.B)   { benchIO(b, proto.CmdRead, 4096, 1, true) }
func BenchmarkRandWrite_4K_QD32(b *testing.B) { benchIO(b, proto.CmdWrite, 4096, 32, true) }

// BenchmarkPeerGone is the poll a write makes before it starts (hangup.go).
func BenchmarkPeerGone(b *testing.B) {
	c, _ := testutil.TCPPair(b)
	s := rawsock.New(c)
	if s == nil {
		b.Skip("no raw socket on this platform")
	}
	for b.Loop() {
		if shut, _ := s.PeerGone(); shut {
			b.Fatal("live peer seen as gone")
		}
	}
}
