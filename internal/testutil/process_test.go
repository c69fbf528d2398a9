package testutil

import (
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartStdout: the process runs and its standard output reaches the
// caller; a command that cannot start fails the test.
func TestStartStdout(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("needs sh")
	}
	cmd := exec.Command(sh, "-c", "echo ready")
	out, err := io.ReadAll(StartStdout(t, cmd))
	if err != nil || strings.TrimSpace(string(out)) != "ready" {
		t.Fatalf("stdout %q, %v; want ready", out, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}

	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		StartStdout(f, exec.Command(filepath.Join(t.TempDir(), "missing")))
	}()
	<-done
	if f.failed == "" {
		t.Fatal("a command that cannot start did not fail the test")
	}
}
