package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/controller/admin"
	"github.com/nvstripe/nvstripe/internal/rpctest"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// notifyWait bounds each wait for a notification or an exit, so that a
// daemon that never sends one fails the test instead of hanging it.
const notifyWait = 2 * time.Minute

// notifySocket plays systemd's part for one daemon (systemd is not PID 1
// here): the unixgram socket a Type=notify unit hands its service in
// NOTIFY_SOCKET, and the messages that arrive on it.
type notifySocket struct {
	path string
	msgs chan string
}

// listenNotify listens on a fresh NOTIFY_SOCKET path until t ends.
func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	n := &notifySocket{path: filepath.Join(t.TempDir(), "notify.sock"), msgs: make(chan string, 256)}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := c.Read(buf)
			if err != nil {
				return
			}
			select {
			case n.msgs <- string(buf[:k]):
			default: // a test that stopped reading does not block the reader
			}
		}
	}()
	return n
}

// daemonProc is one daemon process under the test's NOTIFY_SOCKET.
type daemonProc struct {
	cmd    *exec.Cmd
	lines  chan string   // its stdout, line by line; closed at its end
	exited chan struct{} // closed once it exited
	err    error         // its exit, valid once exited is closed
}

// startDaemon starts bin with args and NOTIFY_SOCKET (plus env) set; the
// process is killed when t ends if it still runs.
func startDaemon(t *testing.T, bin string, n *notifySocket, env []string, args ...string) *daemonProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "NOTIFY_SOCKET="+n.path), env...)
	stdout := testutil.StartStdout(t, cmd)
	p := &daemonProc{cmd: cmd, lines: make(chan string, 1024), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		_, _ = io.Copy(io.Discard, stdout)
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// await waits for the message that holds the assignment want (READY=1,
// STOPPING=1, ...), failing t when the process exits first.
func (p *daemonProc) await(t *testing.T, n *notifySocket, want string) {
	t.Helper()
	timeout := time.NewTimer(notifyWait)
	defer timeout.Stop()
	exited, gone := p.exited, false
	for {
		select {
		case m := <-n.msgs:
			if slices.Contains(strings.Split(m, "\n"), want) {
				return
			}
		case <-exited:
			// What it sent before it exited may still be on its way from
			// the socket to n.msgs: wait for it until the timeout.
			exited, gone = nil, true
		case <-timeout.C:
			if gone {
				t.Fatalf("%s exited (%v) before it sent %s", p.cmd.Args[1], p.err, want)
			}
			t.Fatalf("%s sent no %s within %v", p.cmd.Args[1], want, notifyWait)
		}
	}
}

// line returns the rest of the first stdout line that starts with prefix.
// The daemon prints its listeners before it notifies, so after READY=1 the
// line is there already.
func (p *daemonProc) line(t *testing.T, prefix string) string {
	t.Helper()
	for l := range p.lines {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return rest
		}
	}
	t.Fatalf("%s printed no line starting %q", p.cmd.Args[1], prefix)
	return ""
}

// stop sends SIGTERM and checks that the daemon says STOPPING=1 and then
// exits with status 0: a stop by systemd is an orderly shutdown, not a
// failure of the unit.
func (p *daemonProc) stop(t *testing.T, n *notifySocket) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.await(t, n, "STOPPING=1")
	select {
	case <-p.exited:
	case <-time.After(notifyWait):
		t.Fatalf("%s did not exit within %v of SIGTERM", p.cmd.Args[1], notifyWait)
	}
	if p.err != nil {
		t.Fatalf("%s after SIGTERM: %v, want a clean exit (status 0)", p.cmd.Args[1], p.err)
	}
}

// TestNotifyProcess starts each daemon a unit runs (target serve, agent,
// controller, etcd) as a real process under a NOTIFY_SOCKET the test
// listens on, the way systemd runs a Type=notify service. READY=1 must come
// only once the daemon serves: at that moment, with no retry, the target's
// port answers an NVMe/TCP ICReq, the agent's and the controller's sockets
// answer gRPC, etcd answers a read. A unit with WatchdogSec gets WATCHDOG=1
// pings. SIGTERM (systemctl stop) must bring STOPPING=1 and exit status 0.
// Before, no daemon sent anything, so systemd would have waited out
// TimeoutStartSec and failed every unit.
func TestNotifyProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the nvstripe binary")
	}
	bin := buildGossipBinary(t)
	ep := metatest.Start(t)
	a := adminCLI{t: t, etcd: ep[0], cluster: "notify"}
	a.ok("initialized", "cluster", "init", "--slot-size", "1MiB")
	etcdArgs := []string{"--etcd", ep[0], "--cluster", "notify"}

	t.Run("target", func(t *testing.T) {
		n := listenNotify(t)
		p := startDaemon(t, bin, n, []string{"WATCHDOG_USEC=200000"}, "target", "serve", "--dir", t.TempDir(),
			"--listen", "127.0.0.1:0", "--nqn", "nqn.2026-12.io.nvstripe:notify", "--ns", "d0:1MiB", "--allow-host", "any")
		p.await(t, n, "READY=1")
		checkICResp(t, p.line(t, "listener 0: "))
		p.await(t, n, "WATCHDOG=1")
		p.stop(t, n)
	})
	t.Run("agent", func(t *testing.T) {
		n, dir := listenNotify(t), t.TempDir()
		sock := filepath.Join(dir, "agent.sock")
		p := startDaemon(t, bin, n, nil, append([]string{"agent", "--socket", sock, "--state-dir", filepath.Join(dir, "state"),
			"--metrics", ""}, etcdArgs...)...)
		p.await(t, n, "READY=1")
		c, err := api.Dial(sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		rpctest.CheckStandard(t, c.Conn(), api.Agent_ServiceDesc.ServiceName)
		p.stop(t, n)
	})
	t.Run("controller", func(t *testing.T) {
		n := listenNotify(t)
		sock := filepath.Join(t.TempDir(), "controller.sock")
		p := startDaemon(t, bin, n, nil, append([]string{"controller", "--api", sock, "--holder", "notify"}, etcdArgs...)...)
		p.await(t, n, "READY=1")
		c, err := admin.Dial(sock, admin.TLSFiles{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Status(t.Context(), &admin.StatusRequest{}); err != nil {
			t.Fatalf("admin API right after READY=1: %v", err)
		}
		p.stop(t, n)
	})
	t.Run("etcd", func(t *testing.T) {
		n := listenNotify(t)
		p := startDaemon(t, bin, n, nil, "etcd", "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--peer-listen", "127.0.0.1:0")
		p.await(t, n, "READY=1")
		endpoint, _, _ := strings.Cut(p.line(t, "etcd ready: "), " ")
		s, err := meta.Open(t.Context(), meta.Config{Endpoints: []string{endpoint}, Cluster: "notify", DialTimeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("etcd right after READY=1: %v", err)
		}
		s.Close()
		p.stop(t, n)
	})
}

// checkICResp connects to an NVMe/TCP port and checks that it answers an
// ICReq with an ICResp.
func checkICResp(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("target port %s right after READY=1: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(notifyWait))
	if _, err := conn.Write(pdu.ICReq{}.Append(nil)); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, pdu.ICLen)
	if _, err := io.ReadFull(conn, hdr); err != nil {
		t.Fatalf("ICResp from %s: %v", addr, err)
	}
	if h := pdu.ParseHeader(hdr); h.Type != pdu.TypeICResp {
		t.Fatalf("answer to ICReq from %s: PDU type %v, want ICResp", addr, h.Type)
	}
}

// TestAgentStopProcess: `systemctl stop` of the agent (SIGTERM) with a
// volume mapped and freshly written: STOPPING=1, exit status 0, and the
// volume's ownership lease released at once (not left to run out its
// one-minute TTL), so another node may take the volume; the mapping stays
// recorded, and the agent started again (systemctl start, or a reboot)
// maps it again by itself, with the bytes written before the stop.
func TestAgentStopProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the nvstripe binary")
	}
	bin := buildGossipBinary(t)
	cl := startMapCluster(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	args := []string{"agent", "--socket", sock, "--state-dir", filepath.Join(dir, "state"), "--metrics", "", "--holder", "node-a",
		"--lease-ttl", "1m", "--etcd", cl.etcd, "--cluster", cl.cluster}
	n := listenNotify(t)
	p := startDaemon(t, bin, n, nil, args...)
	p.await(t, n, "READY=1")
	if o, _, err := run(t, "map", "v", "--nbd-listen", "127.0.0.1:0", "--agent", sock); err != nil || !strings.HasPrefix(o, "mapped: nbd://") {
		t.Fatalf("map --agent: %q, %v", o, err)
	}
	want := make([]byte, 128<<10)
	for i := range want {
		want[i] = byte(i*7 + 3)
	}
	nbdIO(t, agentURL(t, sock), func(c *nbdtest.Client) error { return c.WriteAt(t.Context(), want, 1<<20) })
	cl.ok("node-a", "volume", "info", "v")
	p.stop(t, n)
	if o := cl.ok("v", "volume", "info", "v"); strings.Contains(o, "node-a") {
		t.Errorf("the stopped agent still owns the volume:\n%s", o)
	}

	n = listenNotify(t)
	p = startDaemon(t, bin, n, nil, args...)
	p.await(t, n, "READY=1")
	var url string
	waitCLI(t, "the restarted agent serving v again", func() bool { url = agentURL(t, sock); return url != "" })
	got := make([]byte, len(want))
	nbdIO(t, url, func(c *nbdtest.Client) error { return c.ReadAt(t.Context(), got, 1<<20) })
	if !bytes.Equal(got, want) {
		t.Error("the bytes written before the stop did not read back after the restart")
	}
	p.stop(t, n)
}

// agentURL is the NBD address (HOST:PORT) of volume v as the agent on sock
// serves it, "" while it does not serve it.
func agentURL(t *testing.T, sock string) string {
	t.Helper()
	o, _, err := run(t, "ls", "--agent", sock, "--map-sockets", "", "-o", "json")
	var rows []agent.Listed
	if err != nil || json.Unmarshal([]byte(o), &rows) != nil || len(rows) != 1 || rows[0].State != api.StateServing {
		return ""
	}
	hostPort, _, _ := strings.Cut(strings.TrimPrefix(rows[0].Device, "nbd://"), "/")
	return hostPort
}

// nbdIO connects to export v at hostPort and runs io on it.
func nbdIO(t *testing.T, hostPort string, io func(*nbdtest.Client) error) {
	t.Helper()
	c, err := nbdtest.Dial(t.Context(), "tcp", hostPort, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := io(c); err != nil {
		t.Fatal(err)
	}
}
