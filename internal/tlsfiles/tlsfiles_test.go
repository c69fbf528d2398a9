package tlsfiles

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
)

func clientFiles(p *nbdtest.PKI) Files {
	return Files{Cert: filepath.Join(p.ClientDir, "client-cert.pem"), Key: filepath.Join(p.ClientDir, "client-key.pem"),
		CA: filepath.Join(p.ClientDir, "ca-cert.pem")}
}

// handshake runs one TLS handshake over a loopback TCP connection and
// returns the server's and the client's errors.
func handshake(t *testing.T, srv, cli *tls.Config) (error, error) {
	t.Helper()
	cn, sn := testutil.TCPPair(t)
	srvErr := make(chan error, 1)
	go func() {
		defer sn.Close()
		c := tls.Server(sn, srv)
		err := c.Handshake()
		if err == nil {
			_, err = c.Read(make([]byte, 1)) // TLS 1.3 reports a refused client certificate here
		}
		srvErr <- err
	}()
	cli = cli.Clone()
	cli.ServerName = "localhost"
	c := tls.Client(cn, cli)
	err := c.Handshake()
	if err == nil {
		_, err = c.Write([]byte{1})
	}
	c.Close()
	return <-srvErr, err
}

// TestServerClientHandshake: a server with a CA and a client with a
// certificate the CA signed agree; without the client certificate the
// server refuses.
func TestServerClientHandshake(t *testing.T) {
	p := nbdtest.NewPKI(t)
	srv, err := NBDKitDir(p.ServerDir, true).Server()
	if err != nil {
		t.Fatal(err)
	}
	if srv.ClientAuth != tls.RequireAndVerifyClientCert || srv.ClientCAs == nil || srv.RootCAs != nil {
		t.Fatalf("server with a CA: ClientAuth %v, ClientCAs %v, RootCAs %v: want client certificates required", srv.ClientAuth, srv.ClientCAs, srv.RootCAs)
	}
	cli, err := clientFiles(p).Client()
	if err != nil {
		t.Fatal(err)
	}
	if se, ce := handshake(t, srv, cli); se != nil || ce != nil {
		t.Fatalf("mutual TLS: server %v, client %v", se, ce)
	}
	anon, err := Files{CA: filepath.Join(p.CAOnlyDir, "ca-cert.pem")}.Client()
	if err != nil {
		t.Fatal(err)
	}
	if se, _ := handshake(t, srv, anon); se == nil {
		t.Fatal("a server with a CA accepted a client without a certificate")
	}
	open, err := NBDKitDir(p.ServerDir, false).Server()
	if err != nil {
		t.Fatal(err)
	}
	if se, ce := handshake(t, open, anon); se != nil || ce != nil {
		t.Fatalf("server without a CA, client without a certificate: server %v, client %v", se, ce)
	}
}

func TestBadFiles(t *testing.T) {
	p := nbdtest.NewPKI(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := NBDKitDir(p.ServerDir, false)
	for _, c := range []struct {
		name string
		load func() (*tls.Config, error)
		is   error
		want string
	}{
		{"server without files", Files{}.Server, ErrPair, ""},
		{"server without key", Files{Cert: good.Cert}.Server, ErrPair, ""},
		{"client with a cert only", Files{Cert: good.Cert}.Client, ErrPair, ""},
		{"CA without PEM", Files{CA: notPEM}.Client, ErrNoPEM, notPEM},
		{"missing CA", Files{Cert: good.Cert, Key: good.Key, CA: filepath.Join(dir, "none")}.Server, os.ErrNotExist, "none"},
		{"key swapped in", Files{Cert: good.Cert, Key: good.Cert}.Server, nil, good.Cert},
	} {
		cfg, err := c.load()
		if err == nil || cfg != nil {
			t.Errorf("%s: %v, %v: want an error", c.name, cfg, err)
			continue
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v, want %v", c.name, err, c.is)
		}
		if c.want != "" && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q does not name %s", c.name, err, c.want)
		}
	}
	if cfg, err := (Files{}).Client(); err != nil || cfg.RootCAs != nil || len(cfg.Certificates) != 0 {
		t.Fatalf("client without files: %v, %v: want the system's roots and no certificate", cfg, err)
	}
}
