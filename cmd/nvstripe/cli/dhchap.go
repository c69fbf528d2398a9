package cli

import (
	"crypto/rand"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/nvmeof/auth"
)

func newGenDHCHAPKeyCmd(*globals) *cobra.Command {
	var hmac, keyLen int
	c := &cobra.Command{
		Use:   "gen-dhchap-key [--hmac 0-3] [--key-length 32|48|64]",
		Short: "Print a new DH-HMAC-CHAP secret (DHHC-1:...) for NVMe in-band authentication",
		Long: "Prints a random secret in the DHHC-1 form nvme gen-dhchap-key uses (and nvme-cli keys work\n" +
			"here too): --hmac 1, 2, 3 transform it with SHA-256, -384, -512 before use (0: none).\n" +
			"Give a host's secret to its target in 'target serve --host-keys FILE' and to the host in\n" +
			"--dhchap-secret-file; a second secret as the controller's makes it bidirectional.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if hmac < 0 || hmac > 3 {
				return usageError{fmt.Errorf("--hmac %d: 0 (none), 1 (SHA-256), 2 (SHA-384) or 3 (SHA-512)", hmac)}
			}
			s, err := auth.GenerateSecret(rand.Reader, uint8(hmac), keyLen)
			if err != nil {
				return usageError{err}
			}
			return report(cmd, map[string]string{"secret": s.String()}, "%s", s)
		},
	}
	c.Flags().IntVar(&hmac, "hmac", 1, "hash that transforms the key: 0 none, 1 SHA-256, 2 SHA-384, 3 SHA-512")
	c.Flags().IntVar(&keyLen, "key-length", 0, "key length: 32, 48 or 64 (default: the hash's digest length, 32 for none)")
	return c
}

// dhchapFlags are the host side's DH-HMAC-CHAP secret files (secrets
// never come from argv).
type dhchapFlags struct {
	secretFile, ctrlFile string
}

func (d *dhchapFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&d.secretFile, "dhchap-secret-file", "", "file with this host's DH-HMAC-CHAP secret (DHHC-1:...), for targets that require authentication")
	fl.StringVar(&d.ctrlFile, "dhchap-ctrl-secret-file", "", "file with the targets' DH-HMAC-CHAP secret: authenticate them too (bidirectional)")
}

// load reads and checks the secrets ("" where no file is given).
func (d *dhchapFlags) load() (secret, ctrl string, err error) {
	if secret, err = readSecretFile("--dhchap-secret-file", d.secretFile); err != nil {
		return "", "", err
	}
	if ctrl, err = readSecretFile("--dhchap-ctrl-secret-file", d.ctrlFile); err != nil {
		return "", "", err
	}
	if err := auth.CheckSecrets(secret, ctrl); err != nil {
		return "", "", usageError{err}
	}
	if ctrl != "" && secret == "" {
		return "", "", usageError{fmt.Errorf("--dhchap-ctrl-secret-file needs --dhchap-secret-file")}
	}
	return secret, ctrl, nil
}
