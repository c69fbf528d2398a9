package testutil

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
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

// Proc is a process that StartReady started.
type Proc struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Wait waits until the process has exited, its standard output read to
// the end, and returns what cmd.Wait returned. It may be called again.
func (p *Proc) Wait() error {
	<-p.done
	return p.err
}

// StartReady starts cmd as StartStdout does and waits until the process
// prints the line "ready" (what nvstripe's daemons print once they
// serve). It returns the process and the rest of the last line before
// "ready" that began with prefix: "" when none did or prefix is "". It
// fails t when the process exits before it is ready. The process is
// killed, and waited for, when t ends.
func StartReady(t testing.TB, cmd *exec.Cmd, prefix string) (*Proc, string) {
	t.Helper()
	stdout := StartStdout(t, cmd)
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	ready := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc, value := bufio.NewScanner(stdout), ""
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok && prefix != "" {
				value = rest
			}
			if sc.Text() == "ready" {
				ready <- value
				break
			}
		}
		close(ready)
		_, _ = io.Copy(io.Discard, stdout)
		p.err = cmd.Wait()
	}()
	value, ok := <-ready
	if !ok {
		t.Fatalf("%s exited before it printed ready: %v", cmd.Path, p.Wait())
	}
	return p, value
}
