package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/nvstripe/nvstripe/internal/cputime"
)

// proc is one long-running process of the stack (etcd, a target, a map,
// nbdkit), its output copied to the run's log.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// startProc runs bin args and waits up to wait for a stdout line starting
// with ready ("" waits for nothing). The process gets SIGKILL when the
// benchmark dies (Pdeathsig), so a crash leaves nothing behind.
func startProc(log io.Writer, name, ready string, wait time.Duration, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout // one pipe, one ordered log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	seen := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintf(log, "%s: %s\n", name, sc.Text())
			if ready != "" && strings.HasPrefix(sc.Text(), ready) {
				close(seen)
				ready = ""
			}
		}
		cmd.Wait()
		close(p.done)
	}()
	if ready == "" {
		return p, nil
	}
	select {
	case <-seen:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited before it was ready (%v); its output is in the log", name, cmd.ProcessState)
	case <-time.After(wait):
		p.stop()
		return nil, fmt.Errorf("%s not ready within %v; its output is in the log", name, wait)
	}
}

// pid is the process's id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop ends the process with SIGTERM (a map flushes and releases its
// lease), SIGKILL after 20 s.
func (p *proc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// group is a set of processes whose CPU time is summed (the targets).
type group []*proc

// cpu is the group's CPU time so far, in seconds.
func (g group) cpu() (float64, error) {
	var sum time.Duration
	for _, p := range g {
		t, err := cputime.Process(p.pid())
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum.Seconds(), nil
}

// freeAddr returns a loopback address nobody listens on right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
