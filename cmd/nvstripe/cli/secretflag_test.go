package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMalformedDHCHAPSecretNamesFlag: every command that reads a
// DH-HMAC-CHAP secret file says which flag gave the malformed secret, as
// the TLS key's error does: a usage error (exit status 2) naming the flag
// and the file.
func TestMalformedDHCHAPSecretNamesFlag(t *testing.T) {
	cl := initCluster(t, "default")
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("DHHC-1:01:not-a-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good, _, err := run(t, "gen-dhchap-key")
	if err != nil {
		t.Fatal(err)
	}
	goodFile := filepath.Join(dir, "good")
	if err := os.WriteFile(goodFile, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	path := "tcp://127.0.0.1:9"
	cmds := map[string][]string{
		"ns add":         {"ns", "add", "--host", "h0", "--nqn", "nqn.test:a", "--nsid", "1", "--path", path},
		"ns discover":    {"ns", "discover", path, "--host", "h0"},
		"ns wipe-label":  {"ns", "wipe-label", "--nqn", "nqn.test:a", "--nsid", "1", "--path", path},
		"agent":          {"agent", "--socket", filepath.Join(dir, "agent.sock"), "--state-dir", filepath.Join(dir, "agent"), "--metrics", ""},
		"controller":     {"controller", "--metrics", ""},
		"map foreground": {"map", "v", "--nbd-listen", "127.0.0.1:0"},
	}
	for name, args := range cmds {
		for _, f := range []struct{ flag, want string }{
			{"--dhchap-secret-file", "--dhchap-secret-file " + bad + ": invalid DH-HMAC-CHAP secret"},
			{"--dhchap-ctrl-secret-file", "--dhchap-ctrl-secret-file " + bad + ": invalid DH-HMAC-CHAP secret"},
		} {
			with := append(append([]string{}, args...), f.flag, bad)
			if f.flag == "--dhchap-ctrl-secret-file" {
				with = append(with, "--dhchap-secret-file", goodFile)
			}
			_, err := cl.run(append(with, "--timeout", "20s")...)
			if err == nil || !strings.Contains(err.Error(), f.want) || ExitCode(err) != 2 {
				t.Errorf("%s %s: %v (exit %d), want a usage error containing %q", name, f.flag, err, ExitCode(err), f.want)
			}
		}
	}
}

// TestMalformedHostKeyNamesFlag: `target serve --host-keys` with a
// malformed secret in the file names the flag, the file and the line.
func TestMalformedHostKeyNamesFlag(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "hosts")
	if err := os.WriteFile(keys, []byte("# hosts\nnqn.test:host DHHC-1:01:not-a-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, "target", "serve", "--dir", filepath.Join(dir, "t"), "--nqn", "nqn.test:t", "--listen", "127.0.0.1:0",
		"--ns", "a:8MiB", "--host-keys", keys)
	want := "--host-keys: "
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), keys+" line 2: invalid DH-HMAC-CHAP secret") {
		t.Errorf("target serve --host-keys with a malformed secret: %v, want an error naming %q, the file and its line", err, want)
	}
}

// TestTargetServeWhoIsAdmitted: `target serve` with neither --allow-host
// nor a host in --host-keys (none given, or a file of comments) refuses
// to start naming both flags and what each admits, as docs/security.md
// puts it: --allow-host a host on the NQN it claims, --host-keys the hosts
// it lists once they authenticate. Its help says the same.
func TestTargetServeWhoIsAdmitted(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "hosts")
	if err := os.WriteFile(empty, []byte("# no host yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := []string{"target", "serve", "--dir", filepath.Join(dir, "t"), "--nqn", "nqn.test:t", "--listen", "127.0.0.1:0", "--ns", "a:8MiB"}
	for _, extra := range [][]string{nil, {"--host-keys", empty}} {
		_, _, err := run(t, append(serve, extra...)...)
		for _, want := range []string{"no host is allowed", "--allow-host NQN admits a host that claims NQN",
			"--host-keys FILE the hosts it lists once they authenticate (DH-HMAC-CHAP)"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("target serve %q: %v, want an error containing %q", extra, err, want)
			}
		}
	}
	help, _, err := run(t, "target", "serve", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"{--allow-host NQN|any | --host-keys FILE}", "admitted on its claim alone, unauthenticated",
		"this or --host-keys is required", "admitted only once they authenticate (DH-HMAC-CHAP), without --allow-host"} {
		if !strings.Contains(help, want) {
			t.Errorf("target serve --help does not say %q:\n%s", want, help)
		}
	}
}
