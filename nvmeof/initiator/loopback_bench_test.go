package initiator

import (
	"io"
	"net"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// BenchmarkLoopbackTCP is the yardstick for BenchmarkNVMeTCP: raw TCP over
// 127.0.0.1 with no protocol. 128KiB streams 128 KiB writes to a sink;
// pingpong-4KiB sends a 4 KiB request and waits for a 16-byte reply.
func BenchmarkLoopbackTCP(b *testing.B) {
	b.Run("128KiB", func(b *testing.B) {
		client, done := loopbackPair(b, func(c net.Conn) {
			_, _ = io.Copy(io.Discard, c)
		})
		buf := make([]byte, 128<<10)
		b.SetBytes(int64(len(buf)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := client.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		client.Close()
		<-done
	})
	b.Run("pingpong-4KiB", func(b *testing.B) {
		client, done := loopbackPair(b, func(c net.Conn) {
			req := make([]byte, 4096)
			reply := make([]byte, 16)
			for {
				if _, err := io.ReadFull(c, req); err != nil {
					return
				}
				if _, err := c.Write(reply); err != nil {
					return
				}
			}
		})
		req := make([]byte, 4096)
		reply := make([]byte, 16)
		b.SetBytes(int64(len(req)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := client.Write(req); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(client, reply); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		client.Close()
		<-done
	})
}

// loopbackPair listens on 127.0.0.1, runs serve on the accepted connection
// and returns the client side.
func loopbackPair(b *testing.B, serve func(net.Conn)) (net.Conn, chan struct{}) {
	client, server := testutil.TCPPair(b)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer server.Close()
		serve(server)
	}()
	return client, done
}
