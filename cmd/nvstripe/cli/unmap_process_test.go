package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/internal/testutil"
)

// mapProcess is a foreground `nvstripe map` process and what it printed.
type mapProcess struct {
	cmd  *exec.Cmd
	url  string        // from its "serving: URL" line
	out  chan string   // its later stdout lines
	done chan error    // its exit, sent once
	gone chan struct{} // closed once it exited
}

// startMapProcess runs bin with args (a foreground map) and waits until it
// prints "serving: URL".
func startMapProcess(t *testing.T, bin string, args ...string) *mapProcess {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout := testutil.StartStdout(t, cmd)
	p := &mapProcess{cmd: cmd, out: make(chan string, 16), done: make(chan error, 1), gone: make(chan struct{})}
	serving := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if url, ok := strings.CutPrefix(sc.Text(), "serving: "); ok {
				serving <- url
				continue
			}
			p.out <- sc.Text()
		}
		close(serving)
		p.done <- cmd.Wait()
		close(p.gone)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.gone
	})
	url, ok := <-serving
	if !ok {
		t.Fatalf("%q exited before serving", args)
	}
	p.url = url
	return p
}

// TestUnmapForegroundMapProcess: a foreground map started as `nvstripe
// --etcd ADDR map v --nbd-listen ...` (flags before the verb) registers on
// its socket; `unmap v` and `unmap URL` have that process flush, release
// the lease and exit 0, and say so; a map that was killed leaves a socket
// that ls removes without a word, after which unmap says "not mapped".
// Before, unmap of a volume no kernel device served went to the agent
// ("no agent") and ls warned about the missing agent and the dead socket.
func TestUnmapForegroundMapProcess(t *testing.T) {
	cl := startMapCluster(t)
	bin := buildGossipBinary(t)
	dir := t.TempDir()
	maps, noAgent := filepath.Join(dir, "maps"), filepath.Join(dir, "agent.sock")
	serve := func(name string) *mapProcess {
		return startMapProcess(t, bin, "--etcd", cl.etcd, "map", "v", "--map-sockets", maps,
			"--nbd-listen", "unix:"+filepath.Join(dir, name))
	}
	for _, by := range []string{"volume", "url"} {
		p := serve(by + ".sock")
		name := "v"
		if by == "url" {
			name = p.url
		}
		// ls without --agent lists it and says nothing of the agent.
		o, e, err := run(t, "ls", "--map-sockets", maps, "-o", "json")
		var rows []agent.Listed
		if err != nil || e != "" || json.Unmarshal([]byte(o), &rows) != nil || len(rows) != 1 || rows[0].Device != p.url || rows[0].Server != "map" {
			t.Errorf("ls of a foreground map: %q, stderr %q, %v", o, e, err)
		}
		o, _, err = run(t, "unmap", name, "--map-sockets", maps)
		if want := "unmapped v from " + p.url + ": its foreground map flushed it, detached it and released its lease"; err != nil || strings.TrimSpace(o) != want {
			t.Fatalf("unmap %s: %q, %v; want %q", name, o, err, want)
		}
		if err := <-p.done; err != nil {
			t.Errorf("map process after unmap by %s: %v", by, err)
		}
		if line := <-p.out; line != "unmapping: "+p.url {
			t.Errorf("map process printed %q, want unmapping", line)
		}
		if o := cl.ok("v", "volume", "info", "v"); strings.Contains(o, "map.") {
			t.Errorf("lease still held after unmap by %s:\n%s", by, o)
		}
		if _, err := os.Stat(agent.MapSocket(maps, "v")); !os.IsNotExist(err) {
			t.Errorf("record left after unmap by %s: %v", by, err)
		}
	}

	p := serve("killed.sock")
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if _, err := os.Stat(agent.MapSocket(maps, "v")); err != nil {
		t.Fatalf("a killed map left no socket to clean: %v", err)
	}
	o, e, err := run(t, "ls", "--map-sockets", maps, "--agent", noAgent, "-o", "json")
	if err != nil || strings.TrimSpace(o) != "[]" || e != "" && !strings.Contains(e, "no agent answers") {
		t.Errorf("ls with a dead map's socket: %q, stderr %q, %v", o, e, err)
	}
	if _, err := os.Stat(agent.MapSocket(maps, "v")); !os.IsNotExist(err) {
		t.Errorf("ls left the dead map's socket: %v", err)
	}
	_, _, err = run(t, "unmap", "v", "--map-sockets", maps, "--agent", noAgent)
	if !errors.Is(err, agent.ErrNotMapped) || ExitCode(err) != 1 || !strings.Contains(err.Error(), "unmap v: not mapped on this node") {
		t.Errorf("unmap of a volume nothing serves: %v (exit %d)", err, ExitCode(err))
	}
}
