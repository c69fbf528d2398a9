package tlspsk

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

const (
	testHost = "nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100"
	testSub  = "nqn.2026-01.io.nvstripe:test"
)

func testKey(t testing.TB, h uint8) Key {
	k, err := GenerateKey(rand.Reader, h)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// keyLookup is a server lookup that knows one host's key.
func keyLookup(k Key, host string) func(string) ([]byte, *Suite, error) {
	return func(id string) ([]byte, *Suite, error) {
		_, h, sub, err := ParseIdentity(id)
		if err != nil {
			return nil, nil, err
		}
		if h != host {
			return nil, nil, fmt.Errorf("no key for host %s", h)
		}
		_, psk, s, err := k.PSK(h, sub)
		return psk, s, err
	}
}

func clientConfig(t testing.TB, k Key, host, sub string) ClientConfig {
	id, psk, s, err := k.PSK(host, sub)
	if err != nil {
		t.Fatal(err)
	}
	return ClientConfig{Identity: id, PSK: psk, Suite: s}
}

type result struct {
	c   *Conn
	err error
}

// handshakePair runs Client and Server against each other.
func handshakePair(t testing.TB, cc ClientConfig, sc ServerConfig) (*Conn, error, *Conn, error) {
	cr, sr := testutil.TCPPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch := serve(ctx, sr, sc)
	c, cerr := Client(ctx, cr, cc)
	if cerr != nil {
		cr.Close()
	}
	s := <-ch
	return c, cerr, s.c, s.err
}

// serve runs Server over sr on its own goroutine and sends its result;
// on failure it closes sr, as a caller does (the client then sees the
// alert and EOF).
func serve(ctx context.Context, sr net.Conn, sc ServerConfig) <-chan result {
	ch := make(chan result, 1)
	go func() {
		c, err := Server(ctx, sr, sc)
		if err != nil {
			sr.Close()
		}
		ch <- result{c, err}
	}()
	return ch
}

func TestHandshakeAndData(t *testing.T) {
	for _, h := range []uint8{HashSHA256, HashSHA384} {
		k := testKey(t, h)
		c, cerr, s, serr := handshakePair(t, clientConfig(t, k, testHost, testSub), ServerConfig{Lookup: keyLookup(k, testHost)})
		if cerr != nil || serr != nil {
			t.Fatalf("hash %d: client %v, server %v", h, cerr, serr)
		}
		if s.Identity() != "NVMe0R0"+fmt.Sprint(h)+" "+testHost+" "+testSub || c.Suite() != s.Suite() {
			t.Fatalf("server saw identity %q suite %v; client suite %v", s.Identity(), s.Suite(), c.Suite())
		}
		// both directions, a size that spans several records and writes
		data := make([]byte, 3*maxPlaintext+123)
		rand.Read(data)
		for _, dir := range [][2]*Conn{{c, s}, {s, c}} {
			go func() {
				dir[0].Write(data[:1000])
				bufs := net.Buffers{data[1000:1024], nil, data[1024 : 2*maxPlaintext], data[2*maxPlaintext:]}
				WriteBuffers(dir[0], &bufs)
			}()
			got := make([]byte, len(data))
			if _, err := io.ReadFull(dir[1], got); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("hash %d: data differs (%v)", h, err)
			}
		}
		c.Close()
		if n, err := s.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("after close_notify: %d, %v, want io.EOF", n, err)
		}
	}
}

func TestHandshakeRefusesWrongKeyOrIdentity(t *testing.T) {
	k := testKey(t, HashSHA256)
	other := testKey(t, HashSHA256)
	for name, tc := range map[string]struct {
		cc   ClientConfig
		want uint8
	}{
		"wrong key":       {clientConfig(t, other, testHost, testSub), alertDecryptError},
		"unknown host":    {clientConfig(t, k, testHost+"x", testSub), alertUnknownPSKIdentity},
		"wrong hash size": {clientConfig(t, testKey(t, HashSHA384), testHost, testSub), alertHandshakeFailure},
	} {
		_, cerr, _, serr := handshakePair(t, tc.cc, ServerConfig{Lookup: keyLookup(k, testHost)})
		var sa, ca *AlertError
		if !errors.As(serr, &sa) || sa.Remote || sa.Alert != tc.want {
			t.Errorf("%s: server error %v, want it to send alert %s", name, serr, alertName(tc.want))
		}
		if !errors.As(cerr, &ca) || !ca.Remote || ca.Alert != tc.want {
			t.Errorf("%s: client error %v, want alert %s from the server", name, cerr, alertName(tc.want))
		}
		t.Logf("%s: server: %v; client: %v", name, serr, cerr)
	}
}

func TestRecordTamperDetected(t *testing.T) {
	k := testKey(t, HashSHA256)
	cr, sr := testutil.TCPPair(t)
	flip := &flipConn{Conn: cr}
	ctx := context.Background()
	ch := serve(ctx, sr, ServerConfig{Lookup: keyLookup(k, testHost)})
	c, err := Client(ctx, flip, clientConfig(t, k, testHost, testSub))
	s := <-ch
	if err != nil || s.err != nil {
		t.Fatal(err, s.err)
	}
	flip.armed = true
	go c.Write([]byte("block of data"))
	_, err = s.c.Read(make([]byte, 100))
	var ae *AlertError
	if !errors.As(err, &ae) || ae.Alert != alertBadRecordMAC {
		t.Fatalf("read of a tampered record: %v, want bad_record_mac", err)
	}
}

// flipConn flips a bit of the last byte of a write once armed.
type flipConn struct {
	net.Conn
	armed bool
}

func (f *flipConn) Write(p []byte) (int, error) {
	if f.armed {
		p = bytes.Clone(p)
		p[len(p)-1] ^= 1
	}
	return f.Conn.Write(p)
}

func TestKeyUpdateBothWays(t *testing.T) {
	k := testKey(t, HashSHA256)
	c, cerr, s, serr := handshakePair(t, clientConfig(t, k, testHost, testSub), ServerConfig{Lookup: keyLookup(k, testHost)})
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	// the client asks for an update; the server must answer with its own
	c.wmu.Lock()
	_, err := c.raw.Write(c.out.appendRecord(nil, recordHandshake, handshakeMsg(typeKeyUpdate, []byte{1})))
	c.out.update()
	c.wmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	c.rekeyAfter = c.out.seq + 1 // and the second write rotates the key by itself
	go func() { c.Write([]byte("af")); c.Write([]byte("ter")) }()
	got := make([]byte, 5)
	if _, err := io.ReadFull(s, got); err != nil || string(got) != "after" {
		t.Fatalf("server read %q %v", got, err)
	}
	go s.Write([]byte("reply"))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "reply" {
		t.Fatalf("client read %q %v", got, err)
	}
}

func TestSniff(t *testing.T) {
	cr, sr := testutil.TCPPair(t)
	cr.Write([]byte{recordHandshake, 3, 1})
	isTLS, conn, err := Sniff(sr)
	got := make([]byte, 3)
	if err != nil || !isTLS {
		t.Fatal(isTLS, err)
	}
	if _, err := io.ReadFull(conn, got); err != nil || !bytes.Equal(got, []byte{recordHandshake, 3, 1}) {
		t.Fatalf("replayed %x %v", got, err)
	}
}

// holdConn holds back its second write (the client's Finished) and sends
// it with the third, so the server reads its peer's first application
// data together with the Finished.
type holdConn struct {
	net.Conn
	n    int
	held []byte
}

func (h *holdConn) Write(p []byte) (int, error) {
	h.n++
	if h.n == 2 {
		h.held = bytes.Clone(p)
		return len(p), nil
	}
	if h.held != nil {
		_, err := h.Conn.Write(append(h.held, p...))
		h.held = nil
		return len(p), err
	}
	return h.Conn.Write(p)
}

func TestDataWithFinished(t *testing.T) {
	k := testKey(t, HashSHA256)
	cr, sr := testutil.TCPPair(t)
	ch := serve(context.Background(), sr, ServerConfig{Lookup: keyLookup(k, testHost)})
	c, err := Client(context.Background(), &holdConn{Conn: cr}, clientConfig(t, k, testHost, testSub))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	s := <-ch
	if s.err != nil {
		t.Fatal(s.err)
	}
	got := make([]byte, 5)
	s.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(s.c, got); err != nil || string(got) != "hello" {
		t.Fatalf("server read %q %v", got, err)
	}
}

// TestCertificateTLSPeers: a certificate TLS client (Go's crypto/tls) is
// refused by the server with missing_extension; against a certificate
// TLS server the client stops at its ServerHello, which takes no PSK.
func TestCertificateTLSPeers(t *testing.T) {
	k := testKey(t, HashSHA256)
	cr, sr := testutil.TCPPair(t)
	ch := make(chan error, 1)
	go func() {
		_, err := Server(context.Background(), sr, ServerConfig{Lookup: keyLookup(k, testHost)})
		sr.Close()
		ch <- err
	}()
	cerr := tls.Client(cr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}).Handshake()
	serr := <-ch
	var ae *AlertError
	if !errors.As(serr, &ae) || ae.Alert != alertMissingExtension || cerr == nil {
		t.Errorf("crypto/tls client: server %v, client %v; want missing_extension", serr, cerr)
	}

	cr, sr = testutil.TCPPair(t)
	cert := selfSigned(t)
	go func() {
		tls.Server(sr, &tls.Config{Certificates: []tls.Certificate{cert}}).Handshake()
		sr.Close()
	}()
	_, err := Client(context.Background(), cr, clientConfig(t, k, testHost, testSub))
	if !errors.As(err, &ae) || ae.Remote || ae.Alert != alertHandshakeFailure {
		t.Errorf("crypto/tls server: %v, want this side's handshake_failure", err)
	}
}

func selfSigned(t *testing.T) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// BenchmarkHandshake is one full handshake, client and server, over
// loopback TCP (the dial included); cpu-ms/op is the process's CPU time.
//
//	go test -run XXX -bench Handshake ./nvmeof/tlspsk/
func BenchmarkHandshake(b *testing.B) {
	k := testKey(b, HashSHA256)
	cc := clientConfig(b, k, testHost, testSub)
	sc := ServerConfig{Lookup: keyLookup(k, testHost)}
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for b.Loop() {
		c, cerr, s, serr := handshakePair(b, cc, sc)
		if cerr != nil || serr != nil {
			b.Fatal(cerr, serr)
		}
		c.Close()
		s.Close()
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/op")
}
