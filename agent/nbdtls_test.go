package agent

import (
	"crypto/tls"
	"testing"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
)

// TestNBDTLSFlags: off is no TLS; a bad mode or a missing directory is a
// usage mistake; require with --tls-verify-peer loads the server pair
// and demands client certificates.
func TestNBDTLSFlags(t *testing.T) {
	if cfg, req, err := (&NBDTLSFlags{Mode: "off"}).Config(); cfg != nil || req || err != nil {
		t.Errorf("off: %v %v %v", cfg, req, err)
	}
	for _, f := range []NBDTLSFlags{{Mode: "maybe"}, {Mode: "on"}} {
		if _, _, err := f.Config(); !config.IsUsage(err) {
			t.Errorf("%+v: %v, want a usage mistake", f, err)
		}
	}
	pki := nbdtest.NewPKI(t)
	cfg, req, err := (&NBDTLSFlags{Mode: "require", Dir: pki.ServerDir, VerifyPeer: true}).Config()
	if err != nil || !req || len(cfg.Certificates) != 1 || cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.ClientCAs == nil {
		t.Errorf("require, verify peer: %+v %v %v", cfg, req, err)
	}
	if _, _, err := (&NBDTLSFlags{Mode: "on", Dir: pki.CAOnlyDir}).Config(); err == nil || config.IsUsage(err) {
		t.Errorf("no server pair: %v, want a load error", err)
	}
}
