package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/targetd"
)

// TestEtcdPassword: the etcd password comes from a file or the
// environment and works against an etcd with authentication on; the
// removed --etcd-password flag is refused with the way to do it instead.
func TestEtcdPassword(t *testing.T) {
	ep := metatest.Start(t)[0]
	metatest.EnableAuth(t, []string{ep}, "hunter2")
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	os.WriteFile(good, []byte("hunter2\n"), 0o600)
	os.WriteFile(bad, []byte("hunter3\n"), 0o600)
	base := []string{"volume", "ls", "--etcd", ep, "--etcd-timeout", "20s"}
	if _, _, err := run(t, "cluster", "init", "--etcd", ep, "--etcd-user", "root", "--etcd-password-file", good); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, append(base, "--etcd-user", "root", "--etcd-password-file", good)...); err != nil {
		t.Fatalf("password file: %v", err)
	}
	if _, _, err := run(t, append(base, "--etcd-user", "root", "--etcd-password-file", bad)...); err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("wrong password file: %v, want authentication failed", err)
	}
	if _, _, err := run(t, base...); err == nil {
		t.Fatal("no credentials against an etcd with auth: no error")
	}
	t.Setenv(etcdPasswordEnv, "hunter2")
	if _, _, err := run(t, append(base, "--etcd-user", "root")...); err != nil {
		t.Fatalf("password from $%s: %v", etcdPasswordEnv, err)
	}
	_, _, err := run(t, append(base, "--etcd-user", "root", "--etcd-password", "hunter2")...)
	if ExitCode(err) != 2 || !strings.Contains(err.Error(), etcdPasswordEnv) {
		t.Fatalf("--etcd-password: %v (exit %d), want a usage error naming $%s", err, ExitCode(err), etcdPasswordEnv)
	}
	t.Setenv(etcdPasswordEnv, "")
	if _, _, err := run(t, append(base, "--etcd-user", "root")...); ExitCode(err) != 2 {
		t.Fatalf("user without a password: %v (exit %d), want a usage error", err, ExitCode(err))
	}
}

// TestTargetControlTokenMode: 'target serve --control' without
// --control-token-file refuses a DIR/control.token other users may read,
// as a usage mistake, before serving anything.
func TestTargetControlTokenMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, targetd.ControlTokenName)
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	err := Run(ctx, []string{"target", "serve", "--dir", dir, "--nqn", "nqn.2026-01.io.nvstripe:t",
		"--ns", "a:1MiB", "--allow-host", "any", "--listen", "127.0.0.1:0", "--control", "127.0.0.1:0"}, &out, &out)
	if ExitCode(err) != 2 || !strings.Contains(err.Error(), "0600") {
		t.Fatalf("a token file of mode 0644: %v (exit %d), want a usage error naming 0600", err, ExitCode(err))
	}
	if strings.Contains(out.String(), "ready") {
		t.Fatalf("served with a readable token file:\n%s", out.String())
	}
}
