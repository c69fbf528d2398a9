package testutil

import (
	"io"
	"os"
	"os/exec"
	"testing"
)

// StartStdout starts cmd and returns its standard output, for a test that
// reads what a process prints (its address, "ready"). The process's
// standard error goes to the test's unless cmd.Stderr is set. It fails t
// when cmd does not start. Stopping the process and waiting for it are the
// caller's (read stdout to its end before cmd.Wait).
func StartStdout(t testing.TB, cmd *exec.Cmd) io.ReadCloser {
	t.Helper()
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	stdout, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	return stdout
}
