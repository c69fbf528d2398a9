package agent

import (
	"crypto/tls"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/internal/tlsfiles"
)

// NBDTLSFlags are the NBD listener's TLS flags, named and laid out as
// nbdkit's (--tls, --tls-certificates, --tls-verify-peer), for
// Options.NBDTLS and NBDRequireTLS.
type NBDTLSFlags struct {
	Mode       string // off, on, require
	Dir        string // ca-cert.pem, server-cert.pem, server-key.pem
	VerifyPeer bool
}

// AddFlags defines the flags on fl.
func (f *NBDTLSFlags) AddFlags(fl *pflag.FlagSet) {
	fl.StringVar(&f.Mode, "tls", "off", "TLS on the --nbd-listen export: off, on (offered) or require")
	fl.StringVar(&f.Dir, "tls-certificates", "", "directory with server-cert.pem, server-key.pem (and ca-cert.pem for --tls-verify-peer), nbdkit's layout")
	fl.BoolVar(&f.VerifyPeer, "tls-verify-peer", false, "require client certificates signed by DIR/ca-cert.pem")
}

// Config loads the TLS configuration (nil for off) and says whether TLS is
// required. Flags that do not fit together are config.IsUsage.
func (f *NBDTLSFlags) Config() (*tls.Config, bool, error) {
	switch f.Mode {
	case "off":
		return nil, false, nil
	case "on", "require":
	default:
		return nil, false, config.Usage(fmt.Errorf("--tls %q: off, on or require", f.Mode))
	}
	if f.Dir == "" {
		return nil, false, config.Usage(fmt.Errorf("--tls %s needs --tls-certificates DIR", f.Mode))
	}
	cfg, err := tlsfiles.NBDKitDir(f.Dir, f.VerifyPeer).Server()
	if err != nil {
		return nil, false, fmt.Errorf("--tls-certificates: %w", err)
	}
	return cfg, f.Mode == "require", nil
}
