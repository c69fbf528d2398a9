package meta

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta/etcdembed"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
)

// openErr opens a store at endpoints with a short dial timeout and returns
// the error, which must be a DialError naming the endpoints and where they
// came from.
func openErr(t *testing.T, tc *tls.Config, endpoints ...string) string {
	t.Helper()
	s, err := Open(context.Background(), Config{Endpoints: endpoints, EndpointsFrom: "flag --etcd", TLS: tc,
		DialTimeout: 500 * time.Millisecond})
	if err == nil {
		s.Close()
		t.Fatalf("Open(%v) succeeded", endpoints)
	}
	var de *DialError
	if !errors.Is(err, ErrUnreachable) || !errors.As(err, &de) {
		t.Fatalf("want a DialError of class ErrUnreachable, got %v", err)
	}
	want := "etcd unreachable at " + strings.Join(endpoints, ",") + " (from flag --etcd): "
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error lacks %q: %v", want, err)
	}
	return err.Error()
}

// listen is testutil.Serve under this package's old name.
var listen = testutil.Serve

// TestDialErrorsTellCausesApart points Open at wrong endpoints that used
// to give the same "context deadline exceeded": each now says what is
// there.
func TestDialErrorsTellCausesApart(t *testing.T) {
	needEtcd(t)
	closed := freeAddr(t)
	held := make(chan net.Conn, 16)
	silent := listen(t, func(c net.Conn) { held <- c }) // accepts, never answers
	t.Cleanup(func() {
		close(held)
		for c := range held {
			c.Close()
		}
	})
	hs := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(hs.Close)
	httpAddr := hs.Listener.Addr().String()
	peer := freeAddr(t) // for an etcd's peer listener
	srv, err := etcdembed.Start(context.Background(), etcdembed.Options{Dir: t.TempDir(), Fast: true, PeerAddr: peer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cases := []struct {
		name, endpoint, want string
	}{
		{"nothing listens", closed, "nothing listens at " + closed + " (connection refused)"},
		{"silent server", silent, silent + " accepts connections but sent nothing back within"},
		{"http server", httpAddr, httpAddr + " answers HTTP (404 Not Found) but not as an etcd client endpoint: is it etcd's peer port"},
		{"unresolvable name", "etcd.nvstripe.invalid:2379", "the name etcd.nvstripe.invalid does not resolve"},
		{"etcd's peer port", peer, peer + " answers HTTP (404 Not Found) but not as an etcd client endpoint: is it etcd's peer port (usually 2380)"},
		{"https to a plain etcd", "https://" + strings.TrimPrefix(testEndpoints[0], "http://"), "is not a TLS server (it answered in plain text)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if msg := openErr(t, nil, tc.endpoint); !strings.Contains(msg, tc.want) {
				t.Errorf("error lacks %q: %s", tc.want, msg)
			}
		})
	}
	t.Run("two endpoints", func(t *testing.T) {
		want(t, openErr(t, nil, closed, httpAddr), closed+": nothing listens", httpAddr+": "+httpAddr+" answers HTTP")
	})
}

// TestDialErrorsTLS points clients with the wrong TLS settings at an
// embedded etcd that serves TLS and wants client certificates.
func TestDialErrorsTLS(t *testing.T) {
	pki := nbdtest.NewPKI(t)
	srv, err := etcdembed.Start(context.Background(), etcdembed.Options{Dir: t.TempDir(), Fast: true, ClientTLS: &etcdembed.TLSFiles{
		CertFile: filepath.Join(pki.ServerDir, "server-cert.pem"), KeyFile: filepath.Join(pki.ServerDir, "server-key.pem"),
		ClientCAFile: filepath.Join(pki.ServerDir, "ca-cert.pem")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ep := srv.Endpoints()[0]
	addr := strings.TrimPrefix(ep, "https://")
	good := &tls.Config{RootCAs: pki.Pool, Certificates: []tls.Certificate{pki.Client}}
	s, err := Open(context.Background(), Config{Endpoints: []string{ep}, TLS: good})
	if err != nil {
		t.Fatalf("a client with the right TLS settings: %v", err)
	}
	s.Close()
	cases := []struct {
		name     string
		endpoint string
		tc       *tls.Config
		want     string
	}{
		{"plain client", addr, nil, addr + " speaks TLS but the client connects in plain text: give the endpoint as https://" + addr},
		{"untrusted certificate", ep, &tls.Config{Certificates: good.Certificates}, "is not trusted (signed by an unknown authority): give the CA that signed it with --etcd-cacert"},
		{"no client certificate", ep, &tls.Config{RootCAs: pki.Pool}, addr + " wants a client certificate it trusts: give one with --etcd-cert and --etcd-key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if msg := openErr(t, tc.tc, tc.endpoint); !strings.Contains(msg, tc.want) {
				t.Errorf("error lacks %q: %s", tc.want, msg)
			}
		})
	}
}

// TestDialErrorDefaultEndpoints: endpoints nobody set are called the
// default, with the settings that change them.
func TestDialErrorDefaultEndpoints(t *testing.T) {
	e := &DialError{Endpoints: []string{"127.0.0.1:2379"}, From: "default", Problems: []string{"nothing listens"},
		Err: context.DeadlineExceeded}
	want := "etcd unreachable at 127.0.0.1:2379 (the default: set --etcd, NVSTRIPE_ETCD or etcd.endpoints in the config file): nothing listens (context deadline exceeded)"
	if e.Error() != want {
		t.Errorf("got  %s\nwant %s", e.Error(), want)
	}
}

// TestOpenAuthRefused: an etcd with authentication on that refuses the
// client's credentials, or its access to the cluster's keys, is reached:
// the error says what it refused and which settings to fix, not "is etcd
// running there?".
func TestOpenAuthRefused(t *testing.T) {
	needEtcd(t)
	eps := metatest.Start(t)
	metatest.EnableAuth(t, eps, "pw")
	root, err := clientv3.New(clientv3.Config{Endpoints: eps, Username: "root", Password: "pw", DialTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.UserAdd(context.Background(), "nobody", "x"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		user, password, want string
	}{
		{"root", "bad", `refused user "root": wrong user name or password (--etcd-user; the password comes from --etcd-password-file or NVSTRIPE_ETCD_PASSWORD)`},
		{"", "", "requires authentication: pass --etcd-user and a password"},
		{"nobody", "x", `user "nobody" may not read this cluster's keys (/nvstripe/default/): grant one of its roles readwrite`},
	}
	for _, tc := range cases {
		// etcd checks passwords with bcrypt: slow under the race detector
		s, err := Open(context.Background(), Config{Endpoints: eps, Username: tc.user, Password: tc.password, DialTimeout: 30 * time.Second})
		if err == nil {
			s.Close()
			t.Fatalf("user %q: Open succeeded", tc.user)
		}
		if !strings.Contains(err.Error(), "etcd at "+eps[0]) || !strings.Contains(err.Error(), tc.want) ||
			errors.Is(err, ErrUnreachable) || strings.Contains(err.Error(), "is etcd running") {
			t.Errorf("user %q: got %v\nwant %q, not ErrUnreachable", tc.user, err, tc.want)
		}
	}
}

// TestProbeHealthyEtcd: a probe that finds etcd answering its health check
// says so, so that a request that timed out is blamed on a slow etcd, not
// on a missing one.
func TestProbeHealthyEtcd(t *testing.T) {
	needEtcd(t)
	addr := strings.TrimPrefix(testEndpoints[0], "http://")
	got := probeEndpoint(testCtx(t), testEndpoints[0], nil, probeTimeout)
	want := "etcd at " + addr + " answers its health check but not this request in time"
	if !strings.HasPrefix(got, want) {
		t.Errorf("got %q, want %q...", got, want)
	}
}
