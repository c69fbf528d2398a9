package campaign

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// buildBinary is testutil.BuildNvstripe under this package's old name.
var buildBinary = testutil.BuildNvstripe

// freePort is testutil.FreeAddr under this package's old name.
var freePort = testutil.FreeAddr

// proc is one long-running nvstripe process that can be killed, stopped
// and started again with the same arguments.
type proc struct {
	name  string
	bin   string
	args  []string
	ready string // a stdout line prefix that says it is ready
	logw  io.Writer

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	line   string // the ready line
	paused bool
}

// start runs the process and waits (up to wait) for its ready line.
func (p *proc) start(wait time.Duration) error {
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stderr = p.logw
	dieWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	done, ready := make(chan struct{}), make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			fmt.Fprintf(p.logw, "%s: %s\n", p.name, sc.Text())
			if !sent && strings.HasPrefix(sc.Text(), p.ready) {
				sent = true
				ready <- sc.Text()
			}
		}
		cmd.Wait()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done, p.paused = cmd, done, false
	p.mu.Unlock()
	select {
	case line := <-ready:
		p.mu.Lock()
		p.line = line
		p.mu.Unlock()
		return nil
	case <-done:
		return fmt.Errorf("%s exited before it was ready (%v)", p.name, cmd.ProcessState)
	case <-time.After(wait):
		p.kill()
		return fmt.Errorf("%s not ready within %v", p.name, wait)
	}
}

// readyLine is the line that said the process was ready.
func (p *proc) readyLine() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.line
}

// kill sends SIGKILL (continuing it first if stopped) and waits for the end.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// term continues p and sends SIGTERM, then waits up to wait for it to
// end; false when it did not.
func (p *proc) term(wait time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return true
	}
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return true
	case <-time.After(wait):
		return false
	}
}

// stop sends SIGSTOP; cont sends SIGCONT.
func (p *proc) stop() { p.signal(syscall.SIGSTOP, true) }
func (p *proc) cont() { p.signal(syscall.SIGCONT, false) }

func (p *proc) signal(s syscall.Signal, paused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		p.cmd.Process.Signal(s)
		p.paused = paused
	}
}

// running says whether the process runs (and is not stopped).
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.paused {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// logFile opens the campaign's process log. An *os.File takes writes from
// many goroutines whole, and exec hands it to the processes as their
// standard error as it is.
func logFile(t *testing.T, dir string) io.Writer {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "processes.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
