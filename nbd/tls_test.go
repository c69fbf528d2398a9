package nbd

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/nbd/proto"
)

// pki is a CA with a server and a client certificate, written in the
// certificate-directory layout libnbd reads (ca-cert.pem, client-cert.pem,
// client-key.pem).
type pki struct {
	server     tls.Certificate
	pool       *x509.CertPool
	dir        string // CA and client certificate
	caOnlyDir  string // CA only: no client certificate
	clientCert tls.Certificate
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nvstripe test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage) (tls.Certificate, []byte, []byte) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "127.0.0.1"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			DNSNames: []string{"localhost"}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kd, _ := x509.MarshalECPrivateKey(k)
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c, certPEM, keyPEM
	}
	p := &pki{pool: x509.NewCertPool(), dir: t.TempDir(), caOnlyDir: t.TempDir()}
	p.pool.AddCert(ca)
	p.server, _, _ = leaf(2, x509.ExtKeyUsageServerAuth)
	var cc, ck []byte
	p.clientCert, cc, ck = leaf(3, x509.ExtKeyUsageClientAuth)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for name, b := range map[string][]byte{"ca-cert.pem": caPEM, "client-cert.pem": cc, "client-key.pem": ck} {
		os.WriteFile(filepath.Join(p.dir, name), b, 0o600)
	}
	os.WriteFile(filepath.Join(p.caOnlyDir, "ca-cert.pem"), caPEM, 0o600)
	return p
}

// serverTLS requires client certificates signed by the CA.
func (p *pki) serverTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.server}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: p.pool, MinVersion: tls.VersionTLS12}
}

func serveTLS(t *testing.T, p *pki) (*Server, string) {
	m := newMem(t, 8<<20, 4096)
	return serve(t, Options{Exports: map[string]Export{"mem": {Device: m}}, TLS: p.serverTLS(), RequireTLS: true}, "tcp")
}

// TestTLSRequired: before STARTTLS a plain-text client gets
// NBD_REP_ERR_TLS_REQD for every option and is dropped for EXPORT_NAME.
func TestTLSRequired(t *testing.T) {
	_, addr := serveTLS(t, newPKI(t))
	rc := dialRaw(t, "tcp", addr, proto.FlagCFixedNewstyle)
	for _, code := range []proto.Option{proto.OptList, proto.OptInfo, proto.OptGo, proto.OptStructuredReply} {
		if r := rc.option(code, nil); len(r) != 1 || r[0].typ != proto.RepErrTLSReqd {
			t.Errorf("%v before TLS: %+v, want NBD_REP_ERR_TLS_REQD", code, r)
		}
	}
	if r := rc.option(proto.OptStartTLS, []byte{1}); len(r) != 1 || r[0].typ != proto.RepErrInvalid {
		t.Errorf("STARTTLS with data: %+v, want NBD_REP_ERR_INVALID", r)
	}
	rc.write(proto.AppendOption(nil, proto.OptExportName, []byte("mem")))
	rc.expectClosed()
}

// TestTLSRoundTrip: STARTTLS, then the handshake and transmission go
// through TLS (a Go client); a second STARTTLS is refused; a server
// without TLS answers STARTTLS unsupported.
func TestTLSRoundTrip(t *testing.T) {
	p := newPKI(t)
	_, addr := serveTLS(t, p)
	rc := dialRaw(t, "tcp", addr, proto.FlagCFixedNewstyle)
	if r := rc.option(proto.OptStartTLS, nil); len(r) != 1 || r[0].typ != proto.RepAck {
		t.Fatalf("STARTTLS: %+v", r)
	}
	tc := tls.Client(rc.c, &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{p.clientCert}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	rc.c, rc.br = tc, bufio.NewReader(tc)
	if r := rc.option(proto.OptStartTLS, nil); len(r) != 1 || r[0].typ != proto.RepErrInvalid {
		t.Errorf("second STARTTLS: %+v, want NBD_REP_ERR_INVALID", r)
	}
	size, _ := rc.goExport("mem", false)
	if size != 8<<20 {
		t.Fatalf("size %d", size)
	}
	data := pattern(4096, 7)
	rc.send(proto.Request{Type: proto.CmdWrite, Cookie: 1, Offset: 8192, Length: 4096}, data)
	if e, _, _ := rc.simple(0); e != 0 {
		t.Fatalf("write: errno %v", e)
	}
	rc.send(proto.Request{Type: proto.CmdRead, Cookie: 2, Offset: 8192, Length: 4096}, nil)
	if e, _, got := rc.simple(4096); e != 0 || !bytes.Equal(got, data) {
		t.Fatalf("read back over TLS: errno %v, equal %t", e, bytes.Equal(got, data))
	}

	_, plain := serveMem(t, 1<<20, 4096)
	pc := dialRaw(t, "tcp", plain, proto.FlagCFixedNewstyle)
	if r := pc.option(proto.OptStartTLS, nil); len(r) != 1 || r[0].typ != proto.RepErrUnsup {
		t.Errorf("STARTTLS without TLS configured: %+v, want NBD_REP_ERR_UNSUP", r)
	}
}

// TestTLSLibnbd: libnbd's tools over nbds:// with the certificate
// directory: a copy round trip; refused without a client certificate and
// in plain text.
func TestTLSLibnbd(t *testing.T) {
	need(t, "nbdcopy")
	need(t, "nbdinfo")
	p := newPKI(t)
	_, addr := serveTLS(t, p)
	u := "nbds://" + addr + "/mem?tls-certificates=" + p.dir
	src, dst := filepath.Join(t.TempDir(), "src"), filepath.Join(t.TempDir(), "dst")
	want := pattern(8<<20, 3)
	os.WriteFile(src, want, 0o600)
	run(t, "nbdcopy", src, u)
	run(t, "nbdcopy", u, dst)
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, want) {
		t.Fatal("nbdcopy round trip over TLS differs")
	}
	if out, err := runErr(t, "nbdinfo", "nbds://"+addr+"/mem?tls-certificates="+p.caOnlyDir); err == nil {
		t.Errorf("nbdinfo without a client certificate succeeded:\n%s", out)
	}
	if out, err := runErr(t, "nbdinfo", uri(addr, "mem")); err == nil {
		t.Errorf("plain-text nbdinfo succeeded against --tls=require:\n%s", out)
	}
}
