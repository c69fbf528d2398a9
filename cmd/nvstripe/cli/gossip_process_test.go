package cli

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
)

// buildGossipBinary builds the nvstripe binary into a temporary directory.
func buildGossipBinary(t *testing.T) string {
	t.Helper()
	return testutil.BuildNvstripe(t, "")
}

// startGossipTarget starts host's target process, gossiping on a free
// loopback port and finding the pool through etcd (no --gossip-join), and
// waits until it is ready.
func startGossipTarget(t *testing.T, bin string, a adminCLI, host string) *testutil.Proc {
	t.Helper()
	cmd := exec.Command(bin, "target", "serve", "--dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--nqn", "nqn.2026-11.io.nvstripe:gossip-"+host, "--ns", "d0:1MiB", "--allow-host", "any",
		"--gossip", "127.0.0.1:0", "--host", host, "--gossip-profile", "test", "--etcd", a.etcd, "--cluster", a.cluster)
	p, _ := testutil.StartReady(t, cmd, "")
	return p
}

// TestGossipProcesses runs two `target serve --gossip` processes, an
// in-process `target agent` and an in-process `controller --gossip
// --probe=false`, all finding each other through etcd: one target is killed
// with SIGKILL and gossip alone (TCP probes are off) marks its namespace
// down, then out; the other is interrupted, leaves the pool and is marked
// down; the agent's host stays in.
func TestGossipProcesses(t *testing.T) {
	bin := buildGossipBinary(t)
	a, s := adminFixture(t)
	procs := map[string]*testutil.Proc{}
	for _, h := range []string{"h1", "h2"} {
		procs[h] = startGossipTarget(t, bin, a, h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	agentOut, agentDone := &testutil.Buffer{}, make(chan error, 1)
	go func() { // h3's target is not ours: a target agent gossips for it
		agentDone <- Run(ctx, []string{"target", "agent", "--host", "h3", "--ns", "d0", "--gossip", "127.0.0.1:0",
			"--gossip-profile", "test", "--etcd", a.etcd, "--cluster", a.cluster}, agentOut, io.Discard)
	}()
	t.Cleanup(func() { cancel(); <-agentDone })
	out, errOut := &testutil.Buffer{}, &testutil.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"controller", "--holder", "c1", "--interval", "100ms", "--grace", "300ms",
			"--out-after", "2s", "--leader-ttl", "2s", "--probe=false", "--gossip", "127.0.0.1:0", "--gossip-profile", "test", "--api", "",
			"--etcd", a.etcd, "--cluster", a.cluster}, out, errOut)
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	for _, h := range []string{"h1", "h2", "h3"} {
		waitCLI(t, "the controller to judge "+h+" by gossip", func() bool {
			return strings.Contains(errOut.String(), "host "+h+": judged by gossip")
		})
	}
	state := func(ns string) string {
		n, err := s.Namespace(context.Background(), ns)
		if err != nil {
			t.Fatal(err)
		}
		return n.State
	}
	if err := procs["h1"].Cmd.Process.Kill(); err != nil { // SIGKILL: no Leave
		t.Fatal(err)
	}
	waitCLI(t, "h1-n1 down", func() bool { return state("h1-n1") == "down" })
	// The controller logs the change just after etcd has it.
	waitCLI(t, "h1-n1's change logged", func() bool { return strings.Contains(errOut.String(), "namespace h1-n1: host h1 down by ") })
	if !strings.Contains(errOut.String(), "namespace h1-n1: host h1 down by gossip") {
		t.Errorf("h1-n1 went down, but not by gossip:\n%s", errOut.String())
	}
	waitCLI(t, "h1-n1 out", func() bool { return state("h1-n1") == "out" })
	if err := procs["h2"].Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := procs["h2"].Wait(); err != nil {
		t.Errorf("interrupted target: %v", err)
	}
	waitCLI(t, "h2-n1 down", func() bool { return state("h2-n1") == "down" })
	for _, ns := range []string{"h0-n1", "h3-n1", "h4-n1"} {
		if st := state(ns); st != "in" {
			t.Errorf("%s is %s, want in (h3 gossips alive; h0 and h4 do not gossip and are not probed)", ns, st)
		}
	}
	seeds, err := s.GossipSeeds(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names := fmt.Sprint(seedNames(seeds))
	if !strings.Contains(names, "c1") || !strings.Contains(names, "h3") || strings.Contains(names, "h2") {
		t.Errorf("seed records %s: want c1 and h3 registered, h2 (left) gone", names)
	}
	stop()
}

func seedNames(recs []*meta.GossipRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Name)
	}
	return out
}

// TestGossipFlagErrors: gossip flags are checked before anything listens.
func TestGossipFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"target", "agent", "--host", "h1"},
		{"target", "agent", "--gossip", "127.0.0.1:0"},
		{"target", "agent", "--gossip", "nowhere:1", "--host", "h1"},
		{"target", "agent", "--gossip", "127.0.0.1:0", "--host", "h1", "--gossip-profile", "fast"},
		{"target", "agent", "--gossip", "127.0.0.1:0", "--host", "h1", "--label", "rack"},
		{"target", "serve", "--dir", t.TempDir(), "--nqn", "nqn.x:y", "--ns", "d:1MiB", "--allow-host", "any", "--host", "h1"},
		{"target", "serve", "--dir", t.TempDir(), "--nqn", "nqn.x:y", "--ns", "d:1MiB", "--allow-host", "any", "--gossip", "127.0.0.1:0"},
	} {
		_, _, err := run(t, args...)
		if ExitCode(err) != 2 {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}
