package volclient

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/nvmeof/auth"
)

// DHCHAPFiles are the files of the host side's DH-HMAC-CHAP secrets
// (--dhchap-secret-file, --dhchap-ctrl-secret-file: secrets never come
// from argv), for NamespaceOptions.DHCHAPSecret and DHCHAPCtrlSecret.
type DHCHAPFiles struct {
	SecretFile, CtrlFile string
}

// AddFlags defines the flags on fl.
func (d *DHCHAPFiles) AddFlags(fl *pflag.FlagSet) {
	fl.StringVar(&d.SecretFile, "dhchap-secret-file", "", "file with this host's DH-HMAC-CHAP secret (DHHC-1:...), for targets that require authentication")
	fl.StringVar(&d.CtrlFile, "dhchap-ctrl-secret-file", "", "file with the targets' DH-HMAC-CHAP secret: authenticate them too (bidirectional)")
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
	if err := auth.CheckSecrets(secret, ctrl); err != nil {
		return "", "", config.Usage(err)
	}
	if ctrl != "" && secret == "" {
		return "", "", config.Usage(fmt.Errorf("--dhchap-ctrl-secret-file needs --dhchap-secret-file"))
	}
	return secret, ctrl, nil
}
