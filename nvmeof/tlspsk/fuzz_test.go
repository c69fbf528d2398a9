package tlspsk

import (
	"bytes"
	"context"
	"crypto/rand"
	"net"
	"testing"
	"time"
)

// sampleHello is a ClientHello of this package's client.
func sampleHello(t testing.TB) []byte {
	k := testKey(t, HashSHA256)
	cc := clientConfig(t, k, testHost, testSub)
	var share [32]byte
	rand.Read(share[:])
	hello, at := buildClientHello(make([]byte, 32), cc.Suite, share[:], cc.Identity)
	copy(hello[at+3:], newSchedule(cc.Suite, cc.PSK).binder(hello[:at]))
	return hello
}

// FuzzParseHello feeds both hello parsers: no panic, and a ClientHello
// that parses has as many binders as identities and a truncation point
// inside the message.
func FuzzParseHello(f *testing.F) {
	hello := sampleHello(f)
	f.Add(hello)
	f.Add(buildServerHello(make([]byte, 32), nil, suiteAES128, make([]byte, 32), 0))
	f.Add(hello[:len(hello)/2])
	f.Fuzz(func(t *testing.T, msg []byte) {
		if len(msg) < 4 {
			return
		}
		if ch, err := parseClientHello(msg); err == nil {
			if len(ch.binders) != len(ch.identities) || len(ch.identities) > 0 && (ch.bindersAt <= 4 || ch.bindersAt >= len(msg)) {
				t.Fatalf("parsed hello with %d identities, %d binders, binders at %d of %d",
					len(ch.identities), len(ch.binders), ch.bindersAt, len(msg))
			}
		}
		parseServerHello(msg)
		checkEncryptedExtensions(msg)
	})
}

// FuzzServerHandshake feeds raw bytes to a server handshake: it must end
// with an error (the bytes cannot complete a handshake) and never panic
// or hang.
func FuzzServerHandshake(f *testing.F) {
	hello := sampleHello(f)
	rec := (&halfConn{}).appendRecord(nil, recordHandshake, hello)
	f.Add(rec)
	f.Add(append(rec, recordCCS, 3, 3, 0, 1, 1))
	f.Add(append((&halfConn{}).appendRecord(nil, recordHandshake, hello[:50]), (&halfConn{}).appendRecord(nil, recordHandshake, hello[50:])...))
	f.Add([]byte{recordHandshake, 3, 1, 0x40, 0x01})
	f.Fuzz(func(t *testing.T, in []byte) {
		k := testKey(t, HashSHA256)
		srv, cli := net.Pipe()
		defer cli.Close()
		go func() { cli.Write(in); cli.Close() }()
		go func() { // drain what the server sends
			buf := make([]byte, 4096)
			for {
				if _, err := cli.Read(buf); err != nil {
					return
				}
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := Server(ctx, srv, ServerConfig{Lookup: keyLookup(k, testHost)}); err == nil {
			t.Fatal("a handshake completed from fuzz input")
		}
		srv.Close()
	})
}

// FuzzRecords feeds raw bytes as the records of an established
// connection: reads end with an error or data that some record carried,
// never a panic.
func FuzzRecords(f *testing.F) {
	var h halfConn
	secret := bytes.Repeat([]byte{7}, 32)
	h.setSecret(suiteAES128, secret)
	good := h.appendRecord(nil, recordAppData, []byte("data"))
	good = h.appendRecord(good, recordHandshake, handshakeMsg(typeKeyUpdate, []byte{0}))
	f.Add(good)
	f.Add(append([]byte{recordAppData, 3, 3, 0x48, 0x01}, make([]byte, 20)...))
	f.Add([]byte{recordAlert, 3, 3, 0, 2, 1, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		srv, cli := net.Pipe()
		defer cli.Close()
		go func() { cli.Write(in); cli.Close() }()
		c := newConn(srv)
		c.suite = suiteAES128
		c.in.setSecret(suiteAES128, secret)
		c.out.setSecret(suiteAES128, secret)
		buf := make([]byte, 1024)
		for range 64 {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	})
}
