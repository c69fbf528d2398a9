package cli

import (
	"crypto/rand"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/nvmeof/tlspsk"
)

func newGenTLSKeyCmd(*globals) *cobra.Command {
	var hmac string
	c := &cobra.Command{
		Use:   "gen-tls-key [--hmac sha256|sha384]",
		Short: "Print a new NVMe/TCP TLS key (NVMeTLSkey-1:...) for TLS 1.3 with a pre-shared key",
		Long: "Prints a random configured PSK in the NVMeTLSkey-1 interchange form (nvme gen-tls-key makes the\n" +
			"same form): --hmac sha256 makes a 32-byte key used with TLS_AES_128_GCM_SHA256, sha384 a 48-byte\n" +
			"key used with TLS_AES_256_GCM_SHA384. Give a host's key to its targets in 'target serve --tls=on\n" +
			"--tls-keys FILE' (lines 'HOSTNQN KEY') and to the host in --tls-key-file.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var h uint8
			switch hmac {
			case "sha256", "1":
				h = tlspsk.HashSHA256
			case "sha384", "2":
				h = tlspsk.HashSHA384
			default:
				return usageError{fmt.Errorf("--hmac %q: sha256 or sha384", hmac)}
			}
			k, err := tlspsk.GenerateKey(rand.Reader, h)
			if err != nil {
				return err
			}
			return report(cmd, map[string]string{"key": k.String()}, "%s", k)
		},
	}
	c.Flags().StringVar(&hmac, "hmac", "sha256", "hash of the key and its cipher suite: sha256 or sha384")
	return c
}
