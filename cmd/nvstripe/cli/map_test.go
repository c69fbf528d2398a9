package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// TestMapKernelNBDMissing: `nvstripe map NAME --nbd /dev/nbd0` where the nbd
// driver is missing fails with the message that says what to do, before
// contacting etcd.
func TestMapKernelNBDMissing(t *testing.T) {
	if _, err := os.Stat("/sys/module/nbd"); err == nil {
		t.Skip("the nbd driver is loaded here; this test checks the message where it is missing")
	}
	_, _, err := run(t, "map", "v", "--nbd", "/dev/nbd0", "--etcd", "127.0.0.1:1")
	want := "map v on /dev/nbd0: nbd kernel module not loaded (modprobe nbd); serve over --nbd-listen or --fuse instead"
	if err == nil || err.Error() != want || ExitCode(err) != 1 {
		t.Fatalf("map --nbd /dev/nbd0: %v, want %q", err, want)
	}
	// Without a way to serve, map attaches the first free kernel device.
	_, _, err = run(t, "map", "v", "--etcd", "127.0.0.1:1")
	want = "map v: nbd kernel module not loaded (modprobe nbd); serve over --nbd-listen or --fuse instead"
	if err == nil || err.Error() != want || ExitCode(err) != 1 {
		t.Fatalf("map v: %v, want %q", err, want)
	}
	// unmap of a device goes to the kernel, not to an agent.
	_, _, err = run(t, "unmap", "/dev/nbd0")
	if err == nil || !strings.Contains(err.Error(), "/dev/nbd0: no such nbd device") {
		t.Fatalf("unmap /dev/nbd0: %v", err)
	}
}

// TestMapUblkMissing: `nvstripe map NAME --ublk` where the ublk driver is
// missing fails at once, before contacting etcd, saying what to do.
func TestMapUblkMissing(t *testing.T) {
	if _, err := os.Stat("/dev/ublk-control"); err == nil {
		t.Skip("the ublk driver is loaded here; this test checks the message where it is missing")
	}
	_, _, err := run(t, "map", "v", "--ublk", "--etcd", "127.0.0.1:1")
	want := "map v as ublk: ublk: driver not available (load ublk_drv; needs Linux 6.0+): stat /dev/ublk-control: no such file or directory; serve over --nbd-listen, --nbd or --fuse instead"
	if err == nil || err.Error() != want || ExitCode(err) != 1 {
		t.Fatalf("map --ublk: %v, want %q", err, want)
	}
}

func TestMapUsage(t *testing.T) {
	for _, args := range [][]string{
		{"map", "v", "--nbd-listen", "127.0.0.1:1", "--fuse", "/mnt"},
		{"map", "v", "--nbd", "/dev/sda"},
		{"map", "v", "--ublk", "--fuse", "/mnt"},
		{"map", "--nbd-listen", "127.0.0.1:1"},
		{"unmap"},
		{"ls", "extra"},
	} {
		if _, _, err := run(t, args...); ExitCode(err) != 2 {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	dir := t.TempDir()
	o, e, err := run(t, "ls", "--agent", filepath.Join(dir, "none.sock"), "--map-sockets", dir)
	if err != nil || !strings.Contains(e, "is `nvstripe agent` running?") || strings.Count(o, "\n") != 1 {
		t.Errorf("ls without an agent or maps: %q, %q, %v; want the header, a hint, no error", o, e, err)
	}
}

// startMapTarget serves three in-memory namespaces (one subsystem each).
func startMapTarget(t *testing.T) string {
	t.Helper()
	var subs []target.SubsystemConfig
	for i := range 3 {
		d, err := blockdev.NewMem(32<<20, 4096)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, target.SubsystemConfig{NQN: fmt.Sprintf("nqn.2024-01.io.test:map-%d", i), AllowAnyHost: true,
			Namespaces: []target.NamespaceConfig{{NSID: 1, Device: d}}})
	}
	tg, err := target.New(target.Config{Listeners: []target.ListenerConfig{{Address: "127.0.0.1:0"}}, Subsystems: subs})
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close() })
	return tg.Addrs()[0]
}

// startMapCluster starts etcd and three namespaces, and creates the 2+1
// volume v of 8 MiB on them.
func startMapCluster(t *testing.T) adminCLI {
	ep := metatest.Start(t)[0]
	cl := adminCLI{t: t, etcd: ep, cluster: "default"}
	addr := startMapTarget(t)
	cl.ok("initialized", "cluster", "init", "--slot-size", "1MiB")
	for i := range 3 {
		h := fmt.Sprintf("h%d", i)
		cl.ok("added", "host", "add", h)
		cl.ok("added", "ns", "add", "--host", h, "--nqn", fmt.Sprintf("nqn.2024-01.io.test:map-%d", i), "--nsid", "1", "--path", "tcp://"+addr)
	}
	cl.ok("created", "volume", "create", "v", "--size", "8MiB", "--k", "2", "--m", "1", "--chunk", "64KiB")
	return cl
}

// TestAgentMapUnmapLs runs `nvstripe agent` in-process and drives it with
// map --agent, ls and unmap; then `nvstripe map` in the foreground.
func TestAgentMapUnmapLs(t *testing.T) {
	cl := startMapCluster(t)
	ep := cl.etcd

	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testutil.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"agent", "--etcd", ep, "--socket", sock, "--state-dir", filepath.Join(dir, "state"),
			"--metrics", "127.0.0.1:0", "--holder", "node-a"}, &out, &errb)
	}()
	waitOutput(t, &out, done, "agent node-a: API on "+sock)

	o, _, err := run(t, "map", "v", "--nbd-listen", "127.0.0.1:0", "--agent", sock)
	if err != nil || !strings.HasPrefix(o, "mapped: nbd://127.0.0.1:") {
		t.Fatalf("map --agent: %q, %v", o, err)
	}
	if _, _, err := run(t, "map", "v", "--nbd-listen", "127.0.0.1:0", "--agent", sock); err == nil || !strings.Contains(err.Error(), "already mapped") {
		t.Errorf("second map: %v", err)
	}
	maps := filepath.Join(dir, "maps")
	o, _, err = run(t, "ls", "--agent", sock, "--map-sockets", maps)
	if f := strings.Fields(o); err != nil || len(f) < 16 || strings.Join(f[:8], " ") != "DEVICE VOLUME MODE EPOCH HEALTH SIZE SERVER NOTE" ||
		!strings.HasPrefix(f[8], "nbd://127.0.0.1:") || strings.Join(f[9:11], " ") != "v rw" || f[11] == "0" || f[12] != "ok" || f[15] != "agent" {
		t.Errorf("ls: %q, %v", o, err)
	}
	// A write allocates a segment: the agent connects its namespaces and
	// publishes the ANA state of their paths, which ns ls shows.
	_, url, _ := strings.Cut(o, "nbd://")
	hostPort, _, _ := strings.Cut(url, "/")
	nc, err := nbdtest.Dial(ctx, "tcp", hostPort, "v")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.WriteAt(ctx, make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	waitCLI(t, "ns ls -o json showing optimized paths", func() bool {
		return strings.Count(cl.ok("h0-n1", "ns", "ls", "-o", "json"), `"ana_state": "optimized"`) == 3
	})
	o, _, err = run(t, "ls", "--agent", sock, "--map-sockets", maps, "-o", "json")
	var anyJSON any
	if json.Unmarshal([]byte(o), &anyJSON) == nil {
		checkJSON(t, "ls -o json", anyJSON)
	}
	var rows []agent.Listed
	var agentEpoch int64
	if err != nil || json.Unmarshal([]byte(o), &rows) != nil || len(rows) != 1 || rows[0].Holder != "node-a" || rows[0].State != api.StateServing ||
		rows[0].Health != api.HealthOK || rows[0].Mode != "rw" || rows[0].Epoch <= 0 || rows[0].Server != "agent" || rows[0].Size != 8<<20 {
		t.Errorf("ls --json: %q, %v", o, err)
	} else {
		agentEpoch = rows[0].Epoch
	}
	cl.ok("node-a", "volume", "info", "v")
	// unmap completes what is mapped here: the volume and its device.
	if got, _ := complete(t, "unmap", "--agent", sock, "--map-sockets", maps, ""); len(got) != 2 || got[0] != "v" || !strings.HasPrefix(got[1], "nbd://127.0.0.1:") {
		t.Errorf("unmap completion: %q, want v and its nbd:// URL", got)
	}
	if o, _, err = run(t, "unmap", "v", "--agent", sock, "--map-sockets", filepath.Join(dir, "maps"), "-o", "json"); err != nil ||
		!strings.HasPrefix(strings.Join(strings.Fields(o), ""), `{"unmapped":"v","device":"nbd://127.0.0.1:`) || !strings.Contains(o, `"server": "agent"`) {
		t.Errorf("unmap: %q, %v", o, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("agent: %v\n%s", err, errb.String())
	}

	// In the foreground: serving until interrupted, then the lease is free.
	fctx, fcancel := context.WithCancel(context.Background())
	var fout, ferr testutil.Buffer
	go func() {
		done <- Run(fctx, []string{"map", "v", "--nbd-listen", "unix:" + filepath.Join(dir, "v.sock"), "--etcd", ep, "--log-format", "json",
			"--map-sockets", maps}, &fout, &ferr)
	}()
	furl := "nbd+unix:///v?socket=" + filepath.Join(dir, "v.sock")
	waitOutput(t, &fout, done, "serving: "+furl)
	// ls sees it beside the agent's socket, which is left but answers no more.
	o, e, err := run(t, "ls", "--agent", sock, "--map-sockets", maps, "-o", "json")
	rows = nil
	if err != nil || json.Unmarshal([]byte(o), &rows) != nil || len(rows) != 1 || rows[0].Device != furl || rows[0].Server != "map" ||
		rows[0].Health != api.HealthOK || rows[0].Epoch <= agentEpoch || !strings.HasPrefix(rows[0].Holder, "map.") {
		t.Errorf("ls of a foreground map: %q, %v", o, err)
	}
	if !strings.Contains(e, "ls: no agent answers on "+sock) {
		t.Errorf("ls --agent of an agent that stopped: no warning: %q", e)
	}
	fcancel()
	if err := <-done; err != nil {
		t.Errorf("map in the foreground: %v", err)
	}
	// Its log lines are JSON records of component map, never agent.
	if l := ferr.String(); !strings.Contains(l, `"component":"map"`) || strings.Contains(l, "agent") || !strings.Contains(l, `"level":"INFO"`) {
		t.Errorf("foreground map's log:\n%s", l)
	}
	if o := cl.ok("v", "volume", "info", "v"); strings.Contains(o, "map.") {
		t.Errorf("lease still held after the foreground map ended:\n%s", o)
	}
	if _, err := os.Stat(filepath.Join(maps, "v.sock")); !os.IsNotExist(err) {
		t.Errorf("foreground map's ls socket left behind: %v", err)
	}
}

// waitOutput waits until out contains want, failing if the command ends.
func waitOutput(t *testing.T, out *testutil.Buffer, done chan error, want string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(out.String(), want) {
		select {
		case err := <-done:
			t.Fatalf("command ended before printing %q: %v\n%s", want, err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in output:\n%s", want, out.String())
		}
	}
}
