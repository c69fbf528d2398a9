package admin

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/nvstripe/nvstripe/nbd/nbdtest"
)

// serverFiles and clientFiles are the admin TLS files of a test PKI.
func serverFiles(p *nbdtest.PKI) TLSFiles {
	return TLSFiles{Cert: filepath.Join(p.ServerDir, "server-cert.pem"), Key: filepath.Join(p.ServerDir, "server-key.pem"),
		CA: filepath.Join(p.ServerDir, "ca-cert.pem")}
}

func clientFiles(p *nbdtest.PKI) TLSFiles {
	return TLSFiles{Cert: filepath.Join(p.ClientDir, "client-cert.pem"), Key: filepath.Join(p.ClientDir, "client-key.pem"),
		CA: filepath.Join(p.ClientDir, "ca-cert.pem")}
}

// callStatus calls Status once with a short deadline.
func callStatus(c *Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.Status(ctx, &StatusRequest{})
	return err
}

// TestTCPNeedsMutualTLS: no TCP listener without TLS files; on TCP a
// client with a certificate of the controller's CA is served, one without
// a certificate or with one of another CA is refused.
func TestTCPNeedsMutualTLS(t *testing.T) {
	s := fixture(t, 6)
	if _, _, err := Listen(s, "127.0.0.1:0", TLSFiles{}); !errors.Is(err, ErrTLSRequired) {
		t.Fatalf("plain TCP listener: %v, want ErrTLSRequired", err)
	}
	if _, err := Dial("127.0.0.1:1", TLSFiles{}); !errors.Is(err, ErrTLSRequired) {
		t.Fatalf("plain TCP client: %v, want ErrTLSRequired", err)
	}
	pki, other := nbdtest.NewPKI(t), nbdtest.NewPKI(t)
	addr, stop, err := Listen(s, "127.0.0.1:0", serverFiles(pki))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	good, err := Dial(addr, clientFiles(pki))
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if err := callStatus(good); err != nil {
		t.Fatalf("client with the controller CA's certificate: %v", err)
	}

	foreign := clientFiles(other)
	foreign.CA = clientFiles(pki).CA // trusts the controller, signed by another CA
	bad, err := Dial(addr, foreign)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := callStatus(bad); err == nil {
		t.Fatal("client with another CA's certificate was served")
	}

	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pki.Pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	anon := &Client{cc: cc, rpc: NewAdminClient(cc)}
	if err := callStatus(anon); err == nil {
		t.Fatal("client without a certificate was served")
	}
}

// TestUnixSocket: the socket is mode 0600; a stale one is replaced, a live
// one refused; stop removes it.
func TestUnixSocket(t *testing.T) {
	s := fixture(t, 6)
	path := filepath.Join(t.TempDir(), "run", "c.sock")
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "x"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.Rename(stale.Addr().String(), path); err != nil {
		t.Fatal(err)
	}
	stale.Close() // the file stays, nothing answers
	if got, isStale := LocalSocket(path); got != "" || !isStale {
		t.Fatalf("LocalSocket of a stale socket: %q, stale %v; want \"\", stale", got, isStale)
	}

	addr, stop, err := Listen(s, path, TLSFiles{})
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	if got, _ := LocalSocket(path); got != addr {
		t.Fatalf("LocalSocket with a controller on it: %q, want %q", got, addr)
	}
	if got, isStale := LocalSocket(filepath.Join(t.TempDir(), "none.sock")); got != "" || isStale {
		t.Fatalf("LocalSocket without a socket: %q", got)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v, want 0600", fi.Mode(), err)
	}
	if _, _, err := Listen(s, "unix:"+path, TLSFiles{}); !errors.Is(err, ErrSocketInUse) {
		t.Fatalf("second listener on a live socket: %v, want ErrSocketInUse", err)
	}
	c, err := Dial(addr, TLSFiles{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := callStatus(c); err != nil {
		t.Fatalf("over the socket: %v", err)
	}
	stop()
	if _, err := os.Stat(path); err == nil {
		t.Fatal("socket left behind after stop")
	}
}
