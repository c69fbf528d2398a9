package initiator

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
	"github.com/nvstripe/nvstripe/nvmeof/target"
	"github.com/nvstripe/nvstripe/nvmeof/tlspsk"
)

func tlsKey(t testing.TB, h uint8) tlspsk.Key {
	t.Helper()
	k, err := tlspsk.GenerateKey(rand.Reader, h)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// tlsFixture is a fixture whose target runs TLS in mode with key for
// testHost.
func tlsFixture(t *testing.T, mode target.TLSMode, k tlspsk.Key) *fixture {
	return newFixture(t, 1, 1<<20, func(c *target.Config) {
		c.TLS = mode
		c.TLSKeys = map[string]tlspsk.Key{testHost: k}
	})
}

// tapDialer records every byte the initiator sends.
type tapDialer struct {
	mu   sync.Mutex
	sent bytes.Buffer
}

func (d *tapDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &tapConn{Conn: c, d: d}, nil
}

type tapConn struct {
	net.Conn
	d *tapDialer
}

func (c *tapConn) Write(p []byte) (int, error) {
	c.d.mu.Lock()
	c.d.sent.Write(p)
	c.d.mu.Unlock()
	return c.Conn.Write(p)
}

// TestTLSRoundTrip: our initiator and our target run NVMe/TCP inside TLS
// 1.3 (both cipher suites, both target modes) on the admin and I/O
// queues; what goes on the wire opens with a TLS handshake record and
// never shows the data written.
func TestTLSRoundTrip(t *testing.T) {
	for _, mode := range []target.TLSMode{target.TLSOn, target.TLSRequire} {
		for _, h := range []uint8{tlspsk.HashSHA256, tlspsk.HashSHA384} {
			k := tlsKey(t, h)
			f := tlsFixture(t, mode, k)
			tap := &tapDialer{}
			o := f.options(t)
			o.IOQueues, o.TLSKey, o.Dialer = 2, k.String(), tap
			d := open(t, o)
			roundTrip(t, d)
			d.Close()
			tap.mu.Lock()
			wire := tap.sent.Bytes()
			if len(wire) == 0 || wire[0] != 22 || bytes.Contains(wire, bytes.Repeat([]byte("auth"), 16)) {
				t.Errorf("mode %v hash %d: the wire does not look like TLS: % x...", mode, h, wire[:min(len(wire), 16)])
			}
			tap.mu.Unlock()
		}
	}
}

// TestTLSRefused: a wrong key is refused by the target's alert with an
// error that says which key to check; a host without a key cannot reach a
// target that requires TLS; a host with a key to a plaintext target is
// told the target does not take TLS.
func TestTLSRefused(t *testing.T) {
	k := tlsKey(t, tlspsk.HashSHA256)
	f := tlsFixture(t, target.TLSRequire, k)
	o := f.options(t)
	o.TLSKey = tlsKey(t, tlspsk.HashSHA256).String()
	_, err := Open(context.Background(), o)
	if !errors.Is(err, ErrTLS) || !errors.Is(err, blockdev.ErrInvalid) ||
		!strings.Contains(err.Error(), "decrypt_error") || !strings.Contains(err.Error(), "--tls-keys") {
		t.Errorf("wrong key: %v, want ErrTLS naming the keys to check", err)
	}
	t.Logf("wrong key: %v", err)

	o.TLSKey = ""
	_, err = Open(context.Background(), o)
	var nn *NotNVMeError
	if !errors.As(err, &nn) || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("no key to a TLS-only target: %v, want NotNVMeError that mentions TLS", err)
	}
	t.Logf("no key: %v", err)
	if got := f.tgt.Stats().Refused[target.RefusedTLSRequired]; got == 0 {
		t.Errorf("target counted %d plaintext refusals", got)
	}

	plain := newFixture(t, 1, 1<<20, nil)
	o = plain.options(t)
	o.TLSKey = k.String()
	_, err = Open(context.Background(), o)
	if !errors.As(err, &nn) || !strings.Contains(err.Error(), "is TLS on at the target") {
		t.Errorf("key to a plaintext target: %v, want NotNVMeError asking whether TLS is on", err)
	}
	t.Logf("plaintext target: %v", err)
}

func TestTLSKeyValidated(t *testing.T) {
	o := Options{SubsysNQN: testNQN, Paths: []string{"127.0.0.1:4420"}, TLSKey: "NVMeTLSkey-1:01:junk:"}
	o.EnsureDefaults()
	if err := o.Validate(); !errors.Is(err, tlspsk.ErrKey) || !errors.Is(err, blockdev.ErrInvalid) {
		t.Fatalf("Validate: %v, want ErrKey", err)
	}
}

// TestTLSDiscovery: discovery runs over TLS too (the identity names the
// discovery NQN), and the log says the port requires TLS 1.3.
func TestTLSDiscovery(t *testing.T) {
	k := tlsKey(t, tlspsk.HashSHA256)
	f := tlsFixture(t, target.TLSRequire, k)
	es, err := Discover(context.Background(), f.addrs[0], DiscoverOptions{HostNQN: testHost, TLSKey: k.String()})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range es {
		if e.SubNQN == testNQN {
			found = e.SecType == pdu.SecTypeTLS13 && e.TReq&3 == pdu.TReqRequired
		}
	}
	if !found {
		t.Fatalf("no entry for %s saying TLS 1.3 required: %+v", testNQN, es)
	}
}
