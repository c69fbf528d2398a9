package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/nvmeof/tlspsk"
)

// TestGenTLSKey: the printed key parses with the asked hash and length.
func TestGenTLSKey(t *testing.T) {
	for h, n := range map[string]int{"sha256": 32, "sha384": 48} {
		out, _, err := run(t, "gen-tls-key", "--hmac", h)
		k, perr := tlspsk.ParseKey(out)
		if err != nil || perr != nil || len(k.Secret) != n {
			t.Errorf("--hmac %s: %q %v %v", h, out, err, perr)
		}
	}
	if _, _, err := run(t, "gen-tls-key", "--hmac", "md5"); ExitCode(err) != 2 {
		t.Errorf("--hmac md5: %v, want a usage error", err)
	}
}

// TestTLSNamespaceAdd: 'target serve --tls=require --tls-keys' takes this
// node only over TLS with its key: 'ns add' (which connects) fails
// without --tls-key-file and with a wrong key, and succeeds with it.
func TestTLSNamespaceAdd(t *testing.T) {
	if _, _, err := run(t, "target", "serve", "--dir", filepath.Join(t.TempDir(), "x"), "--nqn", "nqn.2024-01.io.test:tls", "--ns", "a:8MiB",
		"--allow-host", "any", "--tls", "on"); ExitCode(err) != 2 || !strings.Contains(err.Error(), "--tls-keys") {
		t.Errorf("--tls=on without --tls-keys: %v, want a usage error", err)
	}
	testKeyedNamespaceAdd(t, keyedTarget{
		gen: "gen-tls-key",
		nqn: "nqn.2024-01.io.test:tls",
		serve: func(hostNQN, keys string) []string {
			return []string{"--allow-host", hostNQN, "--tls", "require", "--tls-keys", keys}
		},
		keyFlag:   "--tls-key-file",
		noKey:     "does the target require TLS",
		wrongKey:  "--tls-keys",
		targetLog: []string{"decrypt_error", "plaintext connection refused"},
	})
}
