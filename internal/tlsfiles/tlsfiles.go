// Package tlsfiles is the one loader of TLS PEM files: a certificate, its
// key and a CA, turned into the *tls.Config of a server (which may demand
// client certificates signed by the CA) or of a client (which verifies the
// server against the CA and may present a certificate). Callers name the
// files and set what differs (a minimum version, a server name); errors
// say which file failed. Safe for concurrent use.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Files names the PEM files of one side of a TLS connection.
type Files struct {
	// Cert and Key are this side's certificate and private key: both or
	// neither.
	Cert, Key string
	// CA signs the other side's certificate: a server with a CA demands
	// and verifies client certificates, a client verifies the server
	// against it (else against the system's roots).
	CA string
}

// ErrPair is returned when only one of a certificate and its key is named,
// or when a server has neither.
var ErrPair = errors.New("a certificate and its key go together")

// ErrNoPEM is returned for a CA file without a PEM certificate.
var ErrNoPEM = errors.New("no PEM certificate found")

// NBDKitDir names the files in nbdkit's layout (also qemu's and
// nbd-server's): DIR/server-cert.pem, DIR/server-key.pem and, with
// verifyPeer, DIR/ca-cert.pem.
func NBDKitDir(dir string, verifyPeer bool) Files {
	f := Files{Cert: filepath.Join(dir, "server-cert.pem"), Key: filepath.Join(dir, "server-key.pem")}
	if verifyPeer {
		f.CA = filepath.Join(dir, "ca-cert.pem")
	}
	return f
}

// Server loads a server's configuration (TLS 1.2 at least): Cert and Key
// are required; with CA set, clients must present a certificate it signed.
func (f Files) Server() (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, ErrPair
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if err := f.load(cfg); err != nil {
		return nil, err
	}
	if cfg.RootCAs != nil {
		cfg.ClientCAs, cfg.RootCAs = cfg.RootCAs, nil
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Client loads a client's configuration (TLS 1.2 at least): the server is
// verified against CA when it is set, and Cert and Key, when set, are
// presented to a server that asks.
func (f Files) Client() (*tls.Config, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, ErrPair
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if err := f.load(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// load reads the files that are named into cfg: the pair into
// Certificates, the CA into RootCAs.
func (f Files) load(cfg *tls.Config) error {
	if f.Cert != "" {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return fmt.Errorf("certificate %s, key %s: %w", f.Cert, f.Key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return fmt.Errorf("CA certificate: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("CA certificate %s: %w", f.CA, ErrNoPEM)
		}
	}
	return nil
}
