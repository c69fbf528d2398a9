package target

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
	"github.com/nvstripe/nvstripe/nvmeof/tlspsk"
)

func newTLSKey(t testing.TB) tlspsk.Key {
	k, err := tlspsk.GenerateKey(rand.Reader, tlspsk.HashSHA256)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func tlsFixture(t testing.TB, mode TLSMode, k tlspsk.Key) *fixture {
	return newFixture(t, 1, func(c *Config) {
		c.TLS = mode
		c.TLSKeys = map[string]tlspsk.Key{testHost: k}
	})
}

// dialTLS connects and runs the TLS handshake as hostNQN to subNQN with
// key k, then the ICReq/ICResp exchange inside it.
func dialTLS(t *testing.T, addr string, k tlspsk.Key, hostNQN, subNQN string) *host {
	t.Helper()
	h := dialRaw(t, addr)
	id, psk, s, err := k.PSK(hostNQN, subNQN)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tc, err := tlspsk.Client(ctx, h.nc, tlspsk.ClientConfig{Identity: id, PSK: psk, Suite: s})
	if err != nil {
		t.Fatalf("tls handshake: %v", err)
	}
	h.nc, h.br = tc, bufio.NewReaderSize(tc, 256<<10)
	h.send(pdu.ICReq{}.Append(nil))
	if p := h.read(); p.Header.Type != pdu.TypeICResp {
		t.Fatalf("icresp: %+v", p.Header)
	}
	return h
}

// TestTLSConnectMustMatchIdentity: over TLS, a host's Connect must name
// the host and subsystem of its TLS identity; the same host connects and
// does IO when it does.
func TestTLSConnectMustMatchIdentity(t *testing.T) {
	k := newTLSKey(t)
	f := tlsFixture(t, TLSRequire, k)
	addr := f.t.Addrs()[0]
	h := dialTLS(t, addr, k, testHost, testNQN)
	expectStatus(t, "connect as another host", h.connect(0, 31, pdu.CNTLIDDynamic, testNQN+"-other", "nqn.someone-else", 0, 0),
		pdu.SCConnectInvalidHost, true)
	if got := f.t.Stats().Refused[RefusedTLS]; got != 1 {
		t.Errorf("refused tls %d, want 1", got)
	}
	h = dialTLS(t, addr, k, testHost, testNQN)
	cntlid := h.adminUp(0)
	io := dialTLS(t, addr, k, testHost, testNQN)
	mustOK(t, "io connect", io.connect(1, 31, cntlid, testNQN, testHost, 0, 0))
	data := bytes.Repeat([]byte{0xA5}, nsBS)
	mustOK(t, "write", io.do(rwSQE(pdu.IOWrite, 1, 2, 1, true), data, nil))
	if got := memRead(t, f, 0, 2*nsBS, nsBS); !bytes.Equal(got, data) {
		t.Fatal("the write over TLS did not land")
	}
}

// TestTLSModes: "on" serves plaintext and TLS connections, "require"
// closes a plaintext one (counted) and serves TLS; a wrong key or an
// unknown host is refused in the handshake.
func TestTLSModes(t *testing.T) {
	k := newTLSKey(t)
	on := tlsFixture(t, TLSOn, k)
	dial(t, on.t.Addrs()[0], pdu.Digests{}).adminUp(0)
	dialTLS(t, on.t.Addrs()[0], k, testHost, testNQN).adminUp(0)

	req := tlsFixture(t, TLSRequire, k)
	plain := dialRaw(t, req.t.Addrs()[0])
	plain.send(pdu.ICReq{}.Append(nil))
	plain.expectClosed()
	if got := req.t.Stats().Refused[RefusedTLSRequired]; got != 1 {
		t.Errorf("refused tls_required %d, want 1", got)
	}
	probe := dialRaw(t, req.t.Addrs()[0]) // a port probe: closes at once, refused for nothing
	probe.nc.Close()
	for name, c := range map[string]struct {
		key  tlspsk.Key
		host string
	}{"wrong key": {newTLSKey(t), testHost}, "unknown host": {k, "nqn.someone-else"}} {
		h := dialRaw(t, req.t.Addrs()[0])
		id, psk, s, _ := c.key.PSK(c.host, testNQN)
		_, err := tlspsk.Client(context.Background(), h.nc, tlspsk.ClientConfig{Identity: id, PSK: psk, Suite: s})
		var ae *tlspsk.AlertError
		if !errors.As(err, &ae) || !ae.Remote {
			t.Errorf("%s: %v, want an alert from the target", name, err)
		}
	}
	// The target sends its alert before it counts the refusal: wait for
	// the count rather than read it once.
	testutil.WaitFor(t, "2 refused TLS handshakes counted", func() bool {
		return req.t.Stats().Refused[RefusedTLS] == 2
	})
	if got := req.t.Stats().Refused[RefusedTLS]; got != 2 {
		t.Errorf("refused tls %d, want 2", got)
	}
}

// TestTLSOpenSSLClient: openssl s_client completes the handshake with the
// target's PSK and identity, and the ICReq bytes it then sends get an
// ICResp.
func TestTLSOpenSSLClient(t *testing.T) {
	k := newTLSKey(t)
	f := tlsFixture(t, TLSRequire, k)
	id, psk, _, _ := k.PSK(testHost, testNQN)
	out, err := testutil.SClient(t, f.t.Addrs()[0], psk, id, pdu.ICReq{}.Append(nil),
		func(out []byte) bool { return len(out) >= 128 })
	if len(out) < 128 || pdu.Type(out[0]) != pdu.TypeICResp || out[2] != 128 {
		t.Fatalf("s_client got % x (%v), want a 128-byte ICResp", out[:min(len(out), 8)], err)
	}
}

func TestTLSDiscoveryEntry(t *testing.T) {
	e := pdu.DiscoveryEntry{TReq: pdu.TReqNotRequired | pdu.TReqDisableSQFlow}
	if got := TLSOff.discEntry(e); got != e {
		t.Errorf("off changed the entry: %+v", got)
	}
	if got := TLSOn.discEntry(e); got.SecType != pdu.SecTypeTLS13 || got.TReq != e.TReq {
		t.Errorf("on: %+v", got)
	}
	if got := TLSRequire.discEntry(e); got.SecType != pdu.SecTypeTLS13 || got.TReq != pdu.TReqRequired|pdu.TReqDisableSQFlow {
		t.Errorf("require: %+v", got)
	}
}

func TestReadTLSKeys(t *testing.T) {
	k := newTLSKey(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("# hosts\n\n"+testHost+" "+k.String()+"  # a comment\n"), 0o600)
	keys, err := ReadTLSKeys(good)
	if err != nil || len(keys) != 1 || keys[testHost].String() != k.String() {
		t.Fatalf("ReadTLSKeys: %v %v", keys, err)
	}
	for _, bad := range []string{testHost, testHost + " NVMeTLSkey-1:01:x:", testHost + " " + k.String() + " extra",
		testHost + " " + k.String() + "\n" + testHost + " " + k.String()} {
		p := filepath.Join(dir, "bad")
		os.WriteFile(p, []byte(bad+"\n"), 0o600)
		if _, err := ReadTLSKeys(p); !errors.Is(err, ErrSpec) {
			t.Errorf("ReadTLSKeys(%q) = %v, want ErrSpec", bad, err)
		}
	}
	if _, err := New(Config{TLS: TLSOn, Listeners: []ListenerConfig{{Address: "127.0.0.1:0"}},
		Subsystems: []SubsystemConfig{{NQN: testNQN, AllowAnyHost: true}}}); err == nil {
		t.Error("TLS without keys was accepted")
	}
}
