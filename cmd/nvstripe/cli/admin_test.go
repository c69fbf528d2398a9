package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/controller/admin"
	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/internal/rpctest"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/placement"
)

// adminFixture records 8 hosts of one namespace each (no data path), a
// 4+2 volume with 4 segments, and a move task half done.
func adminFixture(t *testing.T) (adminCLI, *meta.Store) {
	t.Helper()
	return adminFixtureHosts(t, 8)
}

// adminFixtureHosts is adminFixture with that many hosts.
func adminFixtureHosts(t *testing.T, hosts int) (adminCLI, *meta.Store) {
	t.Helper()
	ep := metatest.Start(t)[0]
	a := adminCLI{t: t, etcd: ep, cluster: "adm"}
	a.ok("slot size 1 MiB", "cluster", "init", "--slot-size", "1MiB")
	a.addHosts(0, hosts, "64MiB")
	s := storetest.Open(t, meta.Config{Endpoints: []string{ep}, Cluster: "adm"})
	storetest.AddVolume(t, s, meta.VolumeSpec{Name: "v", Size: 16 << 20, Layout: meta.Layout{K: 4, M: 2, Chunk: 64 << 10}}, 4)
	return a, s
}

// TestAdminStatusAndCommands checks admin status (text and JSON) through
// healthy, degraded and at-risk volumes with a task in flight, and the
// drain, fail and rebalance commands' effects on etcd.
func TestAdminStatusAndCommands(t *testing.T) {
	a, s := adminFixture(t)
	ctx := context.Background()
	out := a.ok("healthy", "admin", "status")
	if !strings.Contains(out, "none (no controller running)") || !strings.Contains(out, "no tasks") {
		t.Fatalf("status:\n%s", out)
	}
	segs, _ := storetest.Segments(t, s, "v")
	first := segs[0].Slots[0].NS
	a.ok("namespace "+first+": failed", "admin", "fail", first)
	a.ok("degraded by 1", "admin", "status")
	second := segs[0].Slots[1].NS
	a.ok("namespace "+second+": failed", "admin", "fail", second)
	a.ok("at risk", "admin", "status")
	for i := 0; i < 8; i++ {
		if ns := fmt.Sprintf("h%d-n1", i); ns != first && ns != second {
			a.ok("failed", "admin", "fail", ns)
		}
	}
	a.ok("blocked (no home for a shard)", "admin", "status")
	for i := 0; i < 8; i++ {
		if ns := fmt.Sprintf("h%d-n1", i); ns != first && ns != second {
			a.ok("is now in", "ns", "set-state", ns, "in")
		}
	}

	mt := moves.Task{Segment: decide.SegmentID{Volume: "v", Index: 0}, Shard: 0, Kind: decide.MoveRebuild,
		From: first, To: "hX-n1", Holder: "ctl", Done: 1 << 20, Total: 4 << 20, State: meta.TaskRunning}
	mt.Started = time.Now().Add(-time.Minute) // 1/4 done in a minute: about 3 minutes to go
	if err := s.PutTask(ctx, mt.Record()); err != nil {
		t.Fatal(err)
	}
	out = a.ok("[#####---------------]  25%", "admin", "status")
	if !strings.Contains(out, "mv-v-0") || !strings.Contains(out, "shard 0 "+first+" -> hX-n1") {
		t.Fatalf("status with a task:\n%s", out)
	}
	st := &admin.StatusReply{}
	if err := protojson.Unmarshal([]byte(a.ok(`"health": "at risk"`, "admin", "status", "--json")), st); err != nil {
		t.Fatal(err)
	}
	if len(st.Tasks) != 1 || st.Tasks[0].Kind != "rebuild" || st.Tasks[0].EtaSeconds < 150 || st.Tasks[0].EtaSeconds > 210 || st.Volumes[0].Lost != 2 || st.Revision <= 0 {
		t.Fatalf("status --json: %+v", st)
	}

	var spare []string // namespaces still in service
	for i := 0; i < 8; i++ {
		if ns := fmt.Sprintf("h%d-n1", i); ns != first && ns != second {
			spare = append(spare, ns)
		}
	}
	third, host := spare[0], strings.TrimSuffix(spare[1], "-n1")
	a.ok("namespace "+host+"-n1: draining", "admin", "drain", host)
	a.ok("namespace "+third+": draining", "admin", "drain", third)
	a.fails(first+" is failed", "admin", "drain", first)
	a.ok("namespace "+host+"-n1: draining", "admin", "drain", host) // asked again: still draining, not "nothing to drain"
	a.fails("neither a namespace nor a host", "admin", "drain", "nope")
	a.fails("not found", "admin", "fail", "nope-n1")
	if out, err := a.run("admin", "drain"); err == nil || ExitCode(err) != 2 {
		t.Fatalf("drain without an argument: %v %q", err, out)
	}
	a.ok("draining", "admin", "status")
}

// TestAdminRebalancePlan fills six namespaces, adds two empty ones and
// checks that rebalance prints moves to them and --apply records a task the
// controller reads.
func TestAdminRebalancePlan(t *testing.T) {
	a, s := adminFixture(t)
	ctx := context.Background()
	out := a.ok("moves", "admin", "rebalance", "--threshold", "0.01")
	if strings.Contains(out, "task") {
		t.Fatalf("rebalance without --apply recorded a task:\n%s", out)
	}
	a.addHosts(8, 10, "64MiB")
	out = a.ok("SEGMENT", "admin", "rebalance", "--threshold", "0.01")
	if !strings.Contains(out, "h8-n1") && !strings.Contains(out, "h9-n1") {
		t.Fatalf("no move to the new namespaces:\n%s", out)
	}
	a.fails("want a fraction", "admin", "rebalance", "--threshold", "2")
	a.ok("recorded", "admin", "rebalance", "--threshold", "0.01", "--apply")
	snap, err := controller.LoadSnapshot(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.State.Tasks) != 1 || snap.State.Tasks[0].Kind != decide.TaskRebalance || snap.State.Tasks[0].Threshold != 0.01 {
		t.Fatalf("tasks the controller sees: %+v", snap.State.Tasks)
	}
}

// startController runs `nvstripe controller` in the background with test
// timings and the extra flags; cancel stops it and returns Run's error.
func startController(t *testing.T, a adminCLI, holder string, extra ...string) (out *testutil.Buffer, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out = &testutil.Buffer{}
	done := make(chan error, 1)
	args := append([]string{"controller", "--holder", holder, "--interval", "100ms", "--grace", "300ms",
		"--out-after", "1s", "--leader-ttl", "2s", "--probe-timeout", "200ms", "--metrics", "127.0.0.1:0", "--api", "unix:" + filepath.Join(t.TempDir(), "api.sock"),
		"--etcd", a.etcd, "--cluster", a.cluster}, extra...)
	go func() { done <- Run(ctx, args, out, io.Discard) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { stop() })
	return out, stop
}

// waitCLI is testutil.WaitFor under this package's old name.
var waitCLI = testutil.WaitFor

// TestControllerCommand runs two controllers: one leads (admin status names
// it), its TCP probes find every namespace unreachable (the fixture's paths
// lead nowhere) and mark them down. With every host down it first holds
// back marking them out (--min-up); once restarted without the guard, they
// go out; its metrics say so; when it stops the other takes over.
func TestControllerCommand(t *testing.T) {
	a, _ := adminFixture(t)
	_, stop0 := startController(t, a, "c0")
	waitCLI(t, "every namespace down", func() bool {
		o, _ := a.run("admin", "status", "--json")
		return strings.Count(o, `"state": "down"`) == 8
	})
	time.Sleep(2 * time.Second) // twice --out-after
	if o, _ := a.run("admin", "status", "--json"); strings.Contains(o, `"state": "out"`) {
		t.Fatalf("a namespace went out while every host was down:\n%s", o)
	}
	if err := stop0(); err != nil {
		t.Fatal(err)
	}
	out1, stop1 := startController(t, a, "c1", "--min-up=-1")
	waitCLI(t, "c1 leads", func() bool {
		o, _ := a.run("admin", "status")
		return strings.Contains(o, "controller leader: c1")
	})
	_, stop2 := startController(t, a, "c2", "--min-up=-1")
	waitCLI(t, "namespaces out", func() bool {
		o, _ := a.run("admin", "status", "--json")
		return strings.Count(o, `"state": "out"`) == 8 && strings.Contains(o, `"health": "unreadable"`)
	})
	_, addr, _ := strings.Cut(out1.String(), "metrics on ")
	addr, _, _ = strings.Cut(addr, "\n")
	resp, err := http.Get(addr)
	if err != nil {
		t.Fatalf("metrics %q: %v", addr, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`nvstripe_controller_leader{holder="c1"} 1`, `nvstripe_namespaces{state="out"} 8`, `nvstripe_volume_lost_shards{volume="v"} 6`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
	_, api, _ := strings.Cut(out1.String(), "admin API on ")
	api, _, _ = strings.Cut(api, "\n")
	ac, err := admin.Dial(api, admin.TLSFiles{})
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	rpctest.CheckStandard(t, ac.Conn(), admin.ServiceName)         // what `grpcurl -plaintext -unix PATH list` asks
	rpc := adminCLI{t: t, etcd: "127.0.0.1:1", cluster: a.cluster} // etcd unreachable: only the API works
	rpc.ok(`"health": "unreadable"`, "admin", "status", "--json", "--controller", api)
	rpc.ok("controller leader: c1", "admin", "status", "--controller", api)
	rpc.fails("h3-n1 is out", "admin", "drain", "h3-n1", "--controller", api)
	rpc.fails("neither a namespace nor a host", "admin", "drain", "nope", "--controller", api)
	rpc.ok("0 moves", "admin", "rebalance", "--controller", api)
	rpc.ok("namespace h4-n1: failed", "admin", "fail", "h4-n1", "--controller", api)
	a.ok("h4-n1      h4    failed", "admin", "status")
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	waitCLI(t, "c2 leads", func() bool {
		o, _ := a.run("admin", "status")
		return strings.Contains(o, "controller leader: c2")
	})
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
}

// TestAdminDrainWaitUnfinished: `admin drain --wait` that does not finish
// exits 3 when --timeout runs out (no controller carries it out) and 4 when
// the controller reports shards with nowhere to go, printing the blocker
// (before, both exited 0).
func TestAdminDrainWaitUnfinished(t *testing.T) {
	a, s := adminFixture(t)
	_, err := a.run("admin", "drain", "h0", "--wait", "--timeout", "3s")
	if ExitCode(err) != ExitTimedOut || err == nil || !strings.HasPrefix(err.Error(), "not finished (timed out): ") {
		t.Errorf("drain --wait without a controller: %v (exit %d)", err, ExitCode(err))
	}
	// Six hosts for 4+2: the shards of a draining host have nowhere to go
	// (set draining directly: drain itself refuses that up front).
	a, s = adminFixtureHosts(t, 6)
	if err := s.SetNamespaceState(context.Background(), "h0-n1", placement.StateDraining); err != nil {
		t.Fatal(err)
	}
	_, err = a.run("admin", "drain", "h0", "--wait", "--timeout", "60s")
	if ExitCode(err) != ExitBlocked || err == nil || !strings.Contains(err.Error(), "the controller reports blocked: ") ||
		!strings.Contains(err.Error(), "usable failure domains") {
		t.Errorf("drain --wait with shards blocked: %v (exit %d)", err, ExitCode(err))
	}
}
