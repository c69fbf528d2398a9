package cli

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
)

// nbdTLSFlags are the NBD listener's TLS flags, as nbdkit names them.
type nbdTLSFlags struct {
	mode       string // off, on, require
	dir        string // ca-cert.pem, server-cert.pem, server-key.pem
	verifyPeer bool
}

func (f *nbdTLSFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.mode, "tls", "off", "TLS on the --nbd-listen export: off, on (offered) or require")
	fl.StringVar(&f.dir, "tls-certificates", "", "directory with server-cert.pem, server-key.pem (and ca-cert.pem for --tls-verify-peer), nbdkit's layout")
	fl.BoolVar(&f.verifyPeer, "tls-verify-peer", false, "require client certificates signed by DIR/ca-cert.pem")
}

// config is the TLS configuration (nil for off) and whether it is required.
func (f *nbdTLSFlags) config() (*tls.Config, bool, error) {
	switch f.mode {
	case "off":
		return nil, false, nil
	case "on", "require":
	default:
		return nil, false, usageError{fmt.Errorf("--tls %q: off, on or require", f.mode)}
	}
	if f.dir == "" {
		return nil, false, usageError{fmt.Errorf("--tls %s needs --tls-certificates DIR", f.mode)}
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(f.dir, "server-cert.pem"), filepath.Join(f.dir, "server-key.pem"))
	if err != nil {
		return nil, false, fmt.Errorf("--tls-certificates: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.verifyPeer {
		pem, err := os.ReadFile(filepath.Join(f.dir, "ca-cert.pem"))
		if err != nil {
			return nil, false, fmt.Errorf("--tls-verify-peer: %w", err)
		}
		cfg.ClientCAs = x509.NewCertPool()
		if !cfg.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, false, fmt.Errorf("--tls-verify-peer: no certificate in %s/ca-cert.pem", f.dir)
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, f.mode == "require", nil
}
