//go:build linux

package scale

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/cputime"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta/etcdembed"
)

var etcdChild = flag.String("scale.etcd-child", "", "run etcd in this directory and nothing else (the harness starts its test binary so as its etcd)")

const etcdReady = "scale etcd ready "

// TestEtcdChild is the harness's etcd process: `nvstripe etcd --dir DIR`
// (meta/etcdembed with the product's options: fsync on, compaction every 5
// minutes, etcd's default quota) on 127.0.0.1 ports of its own. It runs
// only when the harness starts it (-scale.etcd-child) and stops when its
// standard input closes.
func TestEtcdChild(t *testing.T) {
	if *etcdChild == "" {
		t.Skip("only as the harness's child process (-scale.etcd-child)")
	}
	srv, err := etcdembed.Start(context.Background(), etcdembed.Options{Dir: *etcdChild})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s%s\n", etcdReady, srv.Endpoints()[0])
	_, _ = io.Copy(io.Discard, os.Stdin)
	srv.Close()
}

var etcdOnDisk = flag.Bool("scale.etcd-on-disk", false, "keep etcd's data in the test's temporary folder, not in /dev/shm")

// etcdDir is a fresh folder for etcd's data, removed when the test ends:
// in /dev/shm (memory) unless -scale.etcd-on-disk or there is none. etcd
// still syncs every write as the product's does, but the sync costs
// nothing there: this machine's disk is shared with other work, and its
// sync latency (tens of milliseconds while others build and test) would
// bound etcd's writes instead of etcd itself.
func etcdDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); *etcdOnDisk || err != nil || !st.IsDir() {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "nvstripe-scale-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// etcdProc is the child etcd.
type etcdProc struct {
	endpoint string
	pid      int
	cmd      *exec.Cmd
	stdin    io.Closer
}

// startEtcd starts this test binary as the harness's etcd (TestEtcdChild)
// with its data in a fresh folder; it stops when the test ends.
func startEtcd(t *testing.T) *etcdProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestEtcdChild$", "-test.timeout=0", "-scale.etcd-child="+filepath.Join(etcdDir(t), "etcd"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := testutil.StartStdout(t, cmd)
	p := &etcdProc{pid: cmd.Process.Pid, cmd: cmd, stdin: in}
	t.Cleanup(p.stop)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if ep, ok := strings.CutPrefix(sc.Text(), etcdReady); ok {
			p.endpoint = ep
			break
		}
	}
	if p.endpoint == "" {
		t.Fatalf("the etcd child exited without saying where it listens")
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return p
}

// stop closes the child's input and waits for it; it is killed after 30s.
func (p *etcdProc) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// sample is what the harness reads of etcd at one moment: its metrics and
// its process's CPU time and resident memory.
type sample struct {
	at      time.Time
	metrics map[string]float64 // "name{labels}" -> value
	cpu     time.Duration      // user + system
	rss     int64              // bytes
}

// read samples etcd now.
func (p *etcdProc) read(ctx context.Context) (sample, error) {
	s := sample{at: time.Now()}
	var err error
	if s.metrics, err = testutil.Metrics(ctx, p.endpoint+"/metrics"); err != nil {
		return s, err
	}
	if s.cpu, err = cputime.Process(p.pid); err != nil {
		return s, err
	}
	s.rss, err = testutil.RSS(p.pid)
	return s, err
}

// sum adds the series of metric name whose labels contain every one of
// labels (`key="value"`).
func (s sample) sum(name string, labels ...string) float64 {
	var t float64
	for k, v := range s.metrics {
		series, rest, _ := strings.Cut(k, "{")
		if series != name {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(rest, l)
		}
		if ok {
			t += v
		}
	}
	return t
}
