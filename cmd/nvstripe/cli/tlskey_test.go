package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/meta/metatest"
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
	h, err := nodeIdentity()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	key, _, err := run(t, "gen-tls-key")
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := run(t, "gen-tls-key")
	keys, keyFile, wrongFile := filepath.Join(dir, "hosts"), filepath.Join(dir, "key"), filepath.Join(dir, "wrong")
	os.WriteFile(keys, []byte("# hosts\n"+h.NQN+" "+key), 0o600)
	os.WriteFile(keyFile, []byte(key), 0o600)
	os.WriteFile(wrongFile, []byte(other), 0o600)

	const sub = "nqn.2024-01.io.test:tls"
	if _, _, err := run(t, "target", "serve", "--dir", filepath.Join(dir, "x"), "--nqn", sub, "--ns", "a:8MiB",
		"--allow-host", "any", "--tls", "on"); ExitCode(err) != 2 || !strings.Contains(err.Error(), "--tls-keys") {
		t.Errorf("--tls=on without --tls-keys: %v, want a usage error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var tout, errb syncBuffer
	tdone := make(chan error, 1)
	go func() {
		tdone <- Run(ctx, []string{"target", "serve", "--dir", filepath.Join(dir, "t"), "--nqn", sub, "--listen", "127.0.0.1:0",
			"--ns", "a:8MiB", "--allow-host", h.NQN, "--tls", "require", "--tls-keys", keys}, &tout, &errb)
	}()
	defer func() { cancel(); <-tdone }()
	waitOutput(t, &tout, tdone, "ready")
	addr := regexp.MustCompile(`listener 0: (\S+)`).FindStringSubmatch(tout.String())[1]

	cl := adminCLI{t: t, etcd: metatest.Start(t)[0], cluster: "default"}
	cl.ok("initialized", "cluster", "init", "--slot-size", "1MiB")
	cl.ok("added", "host", "add", "h0")
	add := []string{"ns", "add", "--host", "h0", "--nqn", sub, "--nsid", "1", "--path", "tcp://" + addr}
	cl.fails("does the target require TLS", add...)
	cl.fails("--tls-keys", append(add, "--tls-key-file", wrongFile)...)
	cl.ok("added", append(add, "--tls-key-file", keyFile)...)
	// The target logs a failed handshake after its alert has gone out.
	waitOutput(t, &errb, tdone, "decrypt_error")
	if !strings.Contains(errb.String(), "plaintext connection refused") {
		t.Errorf("target log lacks the refusal of the plaintext connection:\n%s", errb.String())
	}
}
