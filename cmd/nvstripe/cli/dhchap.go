package cli

import (
	"crypto/rand"
	"fmt"

	"github.com/spf13/cobra"

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
