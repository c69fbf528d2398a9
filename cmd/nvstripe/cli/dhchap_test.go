package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
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
	testKeyedNamespaceAdd(t, keyedTarget{
		gen: "gen-dhchap-key",
		nqn: "nqn.2024-01.io.test:dhchap",
		serve: func(_, keys string) []string {
			return []string{"--host-keys", keys}
		},
		keyFlag:   "--dhchap-secret-file",
		noKey:     "authentication",
		wrongKey:  "authentication",
		targetLog: []string{"refused", "authenticated (DH-HMAC-CHAP)"},
	})
}

// keyedTarget is a target that admits this node only with a key: the
// command that makes keys, the target's flags given its host file, the
// flag of 'ns add' that names the key file, what 'ns add' fails with
// without a key and with a wrong one, and what the target logs.
type keyedTarget struct {
	gen             string
	nqn             string
	serve           func(hostNQN, keys string) []string
	keyFlag         string
	noKey, wrongKey string
	targetLog       []string
}

// testKeyedNamespaceAdd starts `target serve` with k's flags and a host
// file that holds this node's key, and checks that 'ns add' (which
// connects) fails without a key and with another key, succeeds with the
// node's key, and that the target logged k.targetLog.
func testKeyedNamespaceAdd(t *testing.T, k keyedTarget) {
	t.Helper()
	h, err := nodeIdentity()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	key, _, err := run(t, k.gen)
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := run(t, k.gen)
	keys, keyFile, wrongFile := filepath.Join(dir, "hosts"), filepath.Join(dir, "key"), filepath.Join(dir, "wrong")
	os.WriteFile(keys, []byte("# hosts\n"+h.NQN+" "+key), 0o600)
	os.WriteFile(keyFile, []byte(key), 0o600)
	os.WriteFile(wrongFile, []byte(other), 0o600)

	ctx, cancel := context.WithCancel(context.Background())
	var tout, errb testutil.Buffer
	tdone := make(chan error, 1)
	go func() {
		tdone <- Run(ctx, append([]string{"target", "serve", "--dir", filepath.Join(dir, "t"), "--nqn", k.nqn, "--listen", "127.0.0.1:0",
			"--ns", "a:8MiB"}, k.serve(h.NQN, keys)...), &tout, &errb)
	}()
	defer func() { cancel(); <-tdone }()
	waitOutput(t, &tout, tdone, "ready")
	addr := regexp.MustCompile(`listener 0: (\S+)`).FindStringSubmatch(tout.String())[1]

	cl := initCluster(t, "default")
	cl.ok("added", "host", "add", "h0")
	add := []string{"ns", "add", "--host", "h0", "--nqn", k.nqn, "--nsid", "1", "--path", "tcp://" + addr}
	cl.fails(k.noKey, add...)
	cl.fails(k.wrongKey, append(add, k.keyFlag, wrongFile)...)
	cl.ok("added", append(add, k.keyFlag, keyFile)...)
	for _, want := range k.targetLog {
		waitOutput(t, &errb, tdone, want)
	}
}
