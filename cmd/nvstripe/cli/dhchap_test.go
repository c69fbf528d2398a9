package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/nvmeof/auth"
)

// TestGenDHCHAPKey: the printed secret parses with the asked transform.
func TestGenDHCHAPKey(t *testing.T) {
	for h, n := range map[string]int{"0": 32, "1": 32, "2": 48, "3": 64} {
		out, _, err := run(t, "gen-dhchap-key", "--hmac", h)
		s, perr := auth.ParseSecret(out)
		if err != nil || perr != nil || fmt.Sprint(s.Hash) != h || len(s.Key) != n {
			t.Errorf("--hmac %s: %q %v %v", h, out, err, perr)
		}
	}
	if _, _, err := run(t, "gen-dhchap-key", "--hmac", "4"); ExitCode(err) != 2 {
		t.Errorf("--hmac 4: %v, want a usage error", err)
	}
}

// TestDHCHAPNamespaceAdd: 'target serve --host-keys' admits this node
// only with its secret: 'ns add' (which connects) fails without
// --dhchap-secret-file and with a wrong one, and succeeds with it.
func TestDHCHAPNamespaceAdd(t *testing.T) {
	h, err := nodeIdentity()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	key, _, err := run(t, "gen-dhchap-key")
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := run(t, "gen-dhchap-key")
	keys, secretFile, wrongFile := filepath.Join(dir, "hosts"), filepath.Join(dir, "secret"), filepath.Join(dir, "wrong")
	os.WriteFile(keys, []byte("# hosts\n"+h.NQN+" "+key), 0o600)
	os.WriteFile(secretFile, []byte(key), 0o600)
	os.WriteFile(wrongFile, []byte(other), 0o600)

	const sub = "nqn.2024-01.io.test:dhchap"
	ctx, cancel := context.WithCancel(context.Background())
	var tout, errb syncBuffer
	tdone := make(chan error, 1)
	go func() {
		tdone <- Run(ctx, []string{"target", "serve", "--dir", filepath.Join(dir, "t"), "--nqn", sub, "--listen", "127.0.0.1:0",
			"--ns", "a:8MiB", "--host-keys", keys}, &tout, &errb)
	}()
	defer func() { cancel(); <-tdone }()
	waitOutput(t, &tout, tdone, "ready")
	addr := regexp.MustCompile(`listener 0: (\S+)`).FindStringSubmatch(tout.String())[1]

	cl := adminCLI{t: t, etcd: metatest.Start(t)[0], cluster: "default"}
	cl.ok("initialized", "cluster", "init", "--slot-size", "1MiB")
	cl.ok("added", "host", "add", "h0")
	add := []string{"ns", "add", "--host", "h0", "--nqn", sub, "--nsid", "1", "--path", "tcp://" + addr}
	cl.fails("authentication", add...)
	cl.fails("authentication", append(add, "--dhchap-secret-file", wrongFile)...)
	cl.ok("added", append(add, "--dhchap-secret-file", secretFile)...)
	waitOutput(t, &errb, tdone, "authenticated (DH-HMAC-CHAP)")
	if !strings.Contains(errb.String(), "refused") {
		t.Errorf("target log has no refusal for the wrong secret:\n%s", errb.String())
	}
}
