package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExec: a command's combined output comes back; a failing one fails
// the test with its output.
func TestExec(t *testing.T) {
	if out := Exec(t, "sh", "-c", "echo out; echo err >&2"); out != "out\nerr\n" {
		t.Fatalf("output %q, want both streams", out)
	}
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Exec(f, "sh", "-c", "echo why >&2; exit 3")
	}()
	<-done
	if !strings.Contains(f.failed, "exit status 3") || !strings.Contains(f.failed, "why") {
		t.Fatalf("failure %q, want the exit status and the output", f.failed)
	}
}

// TestMounted: / is a mount point, a new directory is not.
func TestMounted(t *testing.T) {
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		t.Skipf("no /proc/self/mountinfo here: %v", err)
	}
	if !Mounted(t, "/") {
		t.Error("/ is not a mount point")
	}
	if dir := filepath.Join(t.TempDir(), "d"); Mounted(t, dir) {
		t.Errorf("%s is a mount point", dir)
	}
}
