package volclient

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/nvmeof/auth"
	"github.com/nvstripe/nvstripe/nvmeof/tlspsk"
)

// DHCHAPFiles are the files of the host side's DH-HMAC-CHAP secrets
// (--dhchap-secret-file, --dhchap-ctrl-secret-file: secrets never come
// from argv), for NamespaceOptions.DHCHAPSecret and DHCHAPCtrlSecret, and
// of its NVMe/TCP TLS key (--tls-key-file, NamespaceOptions.TLSKey).
type DHCHAPFiles struct {
	SecretFile, CtrlFile string
	TLSKeyFile           string
}

// AddFlags defines the flags on fl.
func (d *DHCHAPFiles) AddFlags(fl *pflag.FlagSet) {
	fl.StringVar(&d.SecretFile, "dhchap-secret-file", "", "file with this host's DH-HMAC-CHAP secret (DHHC-1:...), for targets that require authentication")
	fl.StringVar(&d.CtrlFile, "dhchap-ctrl-secret-file", "", "file with the targets' DH-HMAC-CHAP secret: authenticate them too (bidirectional)")
	fl.StringVar(&d.TLSKeyFile, "tls-key-file", "", "file with this host's NVMe/TCP TLS key (NVMeTLSkey-1:..., from gen-tls-key): connect to targets over TLS 1.3")
}

// TLSKey reads and checks the TLS key ("" without --tls-key-file);
// mistakes are config.IsUsage.
func (d *DHCHAPFiles) TLSKey() (string, error) {
	key, err := config.ReadSecretFile("--tls-key-file", d.TLSKeyFile)
	if err != nil {
		return "", err
	}
	if key != "" {
		if _, err := tlspsk.ParseKey(key); err != nil {
			return "", config.Usage(fmt.Errorf("--tls-key-file %s: %w", d.TLSKeyFile, err))
		}
	}
	return key, nil
}

// Load reads and checks the secrets ("" where no file is given); mistakes
// are config.IsUsage.
func (d *DHCHAPFiles) Load() (secret, ctrl string, err error) {
	if secret, err = config.ReadSecretFile("--dhchap-secret-file", d.SecretFile); err != nil {
		return "", "", err
	}
	if ctrl, err = config.ReadSecretFile("--dhchap-ctrl-secret-file", d.CtrlFile); err != nil {
		return "", "", err
	}
	if err := auth.CheckSecrets(secret); err != nil {
		return "", "", config.Usage(fmt.Errorf("--dhchap-secret-file %s: %w", d.SecretFile, err))
	}
	if err := auth.CheckSecrets(ctrl); err != nil {
		return "", "", config.Usage(fmt.Errorf("--dhchap-ctrl-secret-file %s: %w", d.CtrlFile, err))
	}
	if ctrl != "" && secret == "" {
		return "", "", config.Usage(fmt.Errorf("--dhchap-ctrl-secret-file needs --dhchap-secret-file"))
	}
	return secret, ctrl, nil
}
