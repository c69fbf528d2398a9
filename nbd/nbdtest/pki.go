package nbdtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
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
)

// PKI is a throw-away certificate authority with a server certificate
// (for 127.0.0.1 and localhost) and a client certificate, for TLS tests,
// also written as certificate directories: ServerDir in nbdkit's layout
// (ca-cert.pem, server-cert.pem, server-key.pem), ClientDir in libnbd's
// (ca-cert.pem, client-cert.pem, client-key.pem), CAOnlyDir with
// ca-cert.pem alone (a client without a certificate).
type PKI struct {
	Server, Client                  tls.Certificate
	Pool                            *x509.CertPool
	ServerDir, ClientDir, CAOnlyDir string
}

// KeyKind is the kind of key NewPKIOf gives the CA and both certificates.
type KeyKind int

const (
	ECDSA KeyKind = iota // P-256
	RSA                  // 2048 bits, as certtool and openssl make by default
)

// NewPKI makes one for t with ECDSA keys, valid for an hour.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	return NewPKIOf(t, ECDSA)
}

// NewPKIOf makes one for t whose keys are all of kind, valid for an hour.
func NewPKIOf(t testing.TB, kind KeyKind) *PKI {
	t.Helper()
	caKey := newKey(t, kind)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nvstripe test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage) (tls.Certificate, []byte, []byte) {
		k := newKey(t, kind)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "127.0.0.1"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			DNSNames: []string{"localhost"}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if kind == RSA {
			tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, k.Public(), caKey)
		if err != nil {
			t.Fatal(err)
		}
		kd, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c, certPEM, keyPEM
	}
	p := &PKI{Pool: x509.NewCertPool(), ServerDir: t.TempDir(), ClientDir: t.TempDir(), CAOnlyDir: t.TempDir()}
	p.Pool.AddCert(ca)
	var sc, sk, cc, ck []byte
	p.Server, sc, sk = leaf(2, x509.ExtKeyUsageServerAuth)
	p.Client, cc, ck = leaf(3, x509.ExtKeyUsageClientAuth)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		filepath.Join(p.ServerDir, "ca-cert.pem"): caPEM, filepath.Join(p.ServerDir, "server-cert.pem"): sc,
		filepath.Join(p.ServerDir, "server-key.pem"): sk, filepath.Join(p.ClientDir, "ca-cert.pem"): caPEM,
		filepath.Join(p.ClientDir, "client-cert.pem"): cc, filepath.Join(p.ClientDir, "client-key.pem"): ck,
		filepath.Join(p.CAOnlyDir, "ca-cert.pem"): caPEM,
	}
	for name, b := range files {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// newKey makes a private key of kind.
func newKey(t testing.TB, kind KeyKind) crypto.Signer {
	t.Helper()
	var k crypto.Signer
	var err error
	if kind == RSA {
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}
