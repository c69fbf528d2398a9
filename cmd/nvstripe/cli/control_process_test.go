package cli

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/targetd"
)

// startControlTarget starts a `nvstripe target serve --control` process
// without a token file and returns the control API's address once it is
// ready.
func startControlTarget(t *testing.T, bin, dir string) string {
	t.Helper()
	cmd := exec.Command(bin, "target", "serve", "--dir", dir, "--listen", "127.0.0.1:0",
		"--nqn", "nqn.2026-12.io.nvstripe:control", "--ns", "d0:1MiB", "--allow-host", "any", "--control", "127.0.0.1:0")
	_, line := testutil.StartReady(t, cmd, "control: http://")
	addr, _, _ := strings.Cut(line, " ")
	if addr == "" {
		t.Fatal("target serve reported no control address before ready")
	}
	return addr
}

// TestControlProcess: a real `target serve --control 127.0.0.1:0` with no
// token file creates DIR/control.token (mode 0600: its user only) and
// refuses an ANA change without the token, with a wrong one and with a
// foreign Host header: the state stays optimized. `target ana-state`
// without a token source is a usage error; with --dir it reads the token
// and changes the state. Before, the loopback control API took the change
// from any local user and from a page of a foreign host.
func TestControlProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the nvstripe binary")
	}
	bin := buildGossipBinary(t)
	dir := t.TempDir()
	addr := startControlTarget(t, bin, dir)
	st, err := os.Stat(filepath.Join(dir, targetd.ControlTokenName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v, want mode 0600", st, err)
	}
	body := `{"listener":"0","group":1,"state":"inaccessible"}`
	for _, try := range []struct{ what, auth, host string }{
		{"no token", "", ""},
		{"a wrong token", "Bearer wrong", ""},
		{"a foreign Host", "", "attacker.example"},
	} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/ana", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if try.auth != "" {
			req.Header.Set("Authorization", try.auth)
		}
		if try.host != "" {
			req.Host = try.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
			t.Errorf("ANA change with %s: %s, want 401 or 403", try.what, resp.Status)
		}
	}
	if _, _, err := run(t, "target", "ana-state", "--control", addr); ExitCode(err) != 2 {
		t.Errorf("ana-state without a token source: %v (exit %d), want a usage error", err, ExitCode(err))
	}
	out, _, err := run(t, "target", "ana-state", "--control", addr, "--dir", dir)
	if err != nil || !strings.Contains(out, "group 1 optimized") {
		t.Fatalf("states after the refused changes: %q %v, want group 1 optimized", out, err)
	}
	if _, _, err := run(t, "target", "ana-state", "--control", addr, "--dir", dir, "--state", "inaccessible"); err != nil {
		t.Fatal(err)
	}
	out, _, err = run(t, "target", "ana-state", "--control", addr, "--dir", dir)
	if err != nil || !strings.Contains(out, "group 1 inaccessible") {
		t.Fatalf("states after the change with the token: %q %v", out, err)
	}
}
