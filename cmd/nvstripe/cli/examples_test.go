package cli

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLocalClusterScript runs deploy/examples/local-cluster.sh, the
// README's cluster by hand, with kernel-chosen ports and CHECK=1: six
// targets, a 4+2 volume mapped over NBD, 16 MiB written, read back and
// compared. It keeps the script true.
func TestLocalClusterScript(t *testing.T) {
	for _, tool := range []string{"bash", "nbdcopy", "cmp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found (nbdcopy: Debian package libnbd-bin): %v", tool, err)
		}
	}
	if testing.Short() {
		t.Skip("-short: starts seven processes")
	}
	bin := buildGossipBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("..", "..", "..", "deploy", "examples", "local-cluster.sh"))
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) } // its trap stops what it started
	cmd.WaitDelay = 20 * time.Second
	cmd.Env = append(cmd.Environ(), "NVSTRIPE="+bin, "DIR="+dir, "PORT_BASE=0", "CHECK=1", "NVSTRIPE_ETCD=", "NVSTRIPE_CLUSTER=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("local-cluster.sh: %v\n%s", err, out)
	}
	for _, want := range []string{"volume ckpt created: 256 MiB, 4+2", "ready: nbd://127.0.0.1:", "check passed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("local-cluster.sh output lacks %q:\n%s", want, out)
		}
	}
}
