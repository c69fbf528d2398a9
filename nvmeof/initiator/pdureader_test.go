package initiator

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/nvstripe/nvstripe/internal/rawsock"
	"github.com/nvstripe/nvstripe/internal/testutil"
)

// TestPDUReaderStream sends messages shaped like PDUs (an 8-byte header
// giving the payload's length, then the payload) of sizes from 0 to
// 300 KiB, written in random pieces, and reads them back the way the
// queue does: headers through Read, payloads through readFull. Over TCP
// the payloads come through raw readv with the next header spilling into
// the buffer; over net.Pipe through the connection's own Read. Every
// byte arrives in order, and a stream cut inside a payload is an
// unexpected EOF.
func TestPDUReaderStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		pair func(testing.TB) (net.Conn, net.Conn)
	}{{"tcp", testutil.TCPPair}, {"pipe", func(testing.TB) (net.Conn, net.Conn) { return net.Pipe() }}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tc.pair(t)
			defer a.Close()
			rd := newPDUReader(a, rawsock.New(a))
			if (rd.raw != nil) != (tc.name == "tcp") {
				t.Fatalf("raw reader %v on %s", rd.raw != nil, tc.name)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var msgs [][]byte
			var stream []byte
			fill := rand.NewChaCha8([32]byte{1})
			for range 120 {
				n := rng.IntN(300 << 10)
				if rng.IntN(2) == 0 {
					n = rng.IntN(64) // bursts of small ones, like completions
				}
				m := make([]byte, n)
				_, _ = fill.Read(m)
				msgs = append(msgs, m)
				stream = binary.LittleEndian.AppendUint64(stream, uint64(n))
				stream = append(stream, m...)
			}
			cut := len(stream) - len(msgs[len(msgs)-1])/2 - 1 // inside the last payload
			go func() {
				defer b.Close()
				wr := rand.New(rand.NewPCG(3, 4))
				for at := 0; at < cut; {
					n := min(cut-at, 1+wr.IntN(200<<10))
					if _, err := b.Write(stream[at : at+n]); err != nil {
						return
					}
					at += n
				}
			}()
			var hdr [8]byte
			for i, want := range msgs {
				if _, err := io.ReadFull(rd, hdr[:]); err != nil {
					t.Fatalf("message %d header: %v", i, err)
				}
				got := make([]byte, binary.LittleEndian.Uint64(hdr[:]))
				err := rd.readFull(got)
				if i == len(msgs)-1 {
					if len(want) > 1 && !errors.Is(err, io.ErrUnexpectedEOF) {
						t.Fatalf("payload cut short: %v, want an unexpected EOF", err)
					}
					return
				}
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("message %d (%d bytes): equal %v, %v", i, len(want), bytes.Equal(got, want), err)
				}
			}
		})
	}
}
