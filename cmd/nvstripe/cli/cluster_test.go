package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// adminCLI runs commands against one etcd and cluster.
type adminCLI struct {
	t       *testing.T
	etcd    string
	cluster string
}

func (a adminCLI) run(args ...string) (string, error) {
	a.t.Helper()
	out, _, err := run(a.t, append(args, "--etcd", a.etcd, "--cluster", a.cluster)...)
	return out, err
}

// ok runs a command that must succeed and print want.
func (a adminCLI) ok(want string, args ...string) string {
	a.t.Helper()
	out, err := a.run(args...)
	if err != nil || !strings.Contains(out, want) {
		a.t.Fatalf("%q: %v\n%s\nwant output containing %q", args, err, out, want)
	}
	return out
}

// fails runs a command that must fail with an error containing want.
func (a adminCLI) fails(want string, args ...string) {
	a.t.Helper()
	out, err := a.run(args...)
	if err == nil || !strings.Contains(err.Error(), want) {
		a.t.Fatalf("%q: err %v (output %q), want an error containing %q", args, err, out, want)
	}
}

// initCluster starts an etcd and initializes cluster name in it with 1 MiB
// slots.
func initCluster(t *testing.T, name string) adminCLI {
	t.Helper()
	a := adminCLI{t: t, etcd: metatest.Start(t)[0], cluster: name}
	a.ok("cluster "+name+" initialized", "cluster", "init", "--slot-size", "1MiB")
	return a
}

// addHosts records hosts h<from> to h<to-1>, each with one namespace of
// size (given, so nothing connects to its path).
func (a adminCLI) addHosts(from, to int, size string) {
	a.t.Helper()
	for i := from; i < to; i++ {
		h := fmt.Sprintf("h%d", i)
		a.ok("host "+h+" added", "host", "add", h)
		a.ok("namespace "+h+"-n1 added", "ns", "add", "--host", h, "--nqn", "nqn.test:"+h, "--nsid", "1", "--path", "tcp://127.0.0.1:4420", "--size", size)
	}
}

// startTarget serves two subsystems from memory on a free loopback port:
// sub-a with one namespace, sub-b with two.
func startTarget(t *testing.T) (addr string, devs map[string]*blockdev.Mem) {
	t.Helper()
	devs = map[string]*blockdev.Mem{}
	mem := func(name string) blockdev.Device {
		d, err := blockdev.NewMem(64<<20, 4096)
		if err != nil {
			t.Fatal(err)
		}
		devs[name] = d
		return d
	}
	cfg := target.Config{
		Listeners: []target.ListenerConfig{{Address: "127.0.0.1:0"}},
		Subsystems: []target.SubsystemConfig{
			{NQN: "nqn.2024-01.io.test:sub-a", AllowAnyHost: true, Namespaces: []target.NamespaceConfig{{NSID: 1, Device: mem("a1")}}},
			{NQN: "nqn.2024-01.io.test:sub-b", AllowAnyHost: true, Namespaces: []target.NamespaceConfig{
				{NSID: 1, Device: mem("b1")}, {NSID: 2, Device: mem("b2")}}},
		},
	}
	tg, err := target.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tg.Close() })
	return tg.Addrs()[0], devs
}

func labelOf(t *testing.T, d *blockdev.Mem) meta.Label {
	t.Helper()
	b := make([]byte, meta.LabelSize)
	if err := d.ReadAt(context.Background(), b, 0); err != nil {
		t.Fatal(err)
	}
	l, err := meta.DecodeLabel(b)
	if err != nil {
		t.Fatalf("label: %v", err)
	}
	return l
}

// TestAdminEndToEnd drives cluster, host, ns and volume commands against an
// embedded etcd and a userspace NVMe/TCP target, including the errors.
func TestAdminEndToEnd(t *testing.T) {
	ep := metatest.Start(t)[0]
	a := adminCLI{t: t, etcd: ep, cluster: "e2e"}
	a.fails(`cluster "e2e" (from flag --cluster) does not exist`, "host", "add", "h0")
	a.fails("slot size", "cluster", "init", "--slot-size", "3MiB")
	out := a.ok("slot size 1 MiB", "cluster", "init", "--slot-size", "1MiB")
	a.fails("already initialized", "cluster", "init")
	a.ok("failure domain host", "cluster", "info")
	for _, h := range []string{"h0", "h1", "h2", "h3", "h4"} {
		a.ok("host "+h+" added", "host", "add", h, "--label", "rack=r1")
	}
	a.fails("already exists", "host", "add", "h0")
	a.fails("want KEY=VALUE", "host", "add", "h9", "--label", "norack")
	if out = a.ok("rack=r1", "host", "ls"); strings.Count(out, "\n") != 6 {
		t.Fatalf("host ls:\n%s", out)
	}
	var hosts []meta.HostRecord
	if err := json.Unmarshal([]byte(a.ok("h4", "host", "ls", "--json")), &hosts); err != nil || len(hosts) != 5 {
		t.Fatalf("host ls --json: %v %v", hosts, err)
	}
	for _, h := range []string{"h0", "h1", "h2"} {
		a.ok("namespace "+h+"-n1 added", "ns", "add", "--host", h, "--nqn", "nqn.test:"+h, "--nsid", "1",
			"--path", "tcp://127.0.0.1:4420", "--path", "tcp://127.0.0.2:4420", "--size", "64MiB")
	}
	a.fails("already recorded", "ns", "add", "--host", "h0", "--nqn", "nqn.test:h0", "--nsid", "1", "--path", "tcp://127.0.0.1:4420", "--size", "64MiB", "--id", "other")
	a.fails("not found", "ns", "add", "--host", "hX", "--nqn", "nqn.test:hX", "--nsid", "1", "--path", "tcp://127.0.0.1:4420", "--size", "64MiB")
	a.fails("want tcp://HOST:PORT", "ns", "add", "--host", "h0", "--nqn", "n", "--nsid", "2", "--path", "127.0.0.1:4420", "--size", "64MiB")
	a.fails("needs --host", "ns", "add", "--nqn", "n", "--nsid", "2", "--path", "tcp://127.0.0.1:4420")

	// A real namespace: connect, write the label, record it.
	addr, devs := startTarget(t)
	a.ok("namespace h3-n1 added", "ns", "add", "--host", "h3", "--nqn", "nqn.2024-01.io.test:sub-a", "--nsid", "1", "--path", "tcp://"+addr)
	c, _ := meta.Open(context.Background(), meta.Config{Endpoints: []string{ep}, Cluster: "e2e"})
	defer c.Close()
	crec, _ := c.Cluster(context.Background())
	if got := labelOf(t, devs["a1"]); got != crec.Label("h3-n1") {
		t.Fatalf("label on the namespace %+v, want %+v", got, crec.Label("h3-n1"))
	}
	// Discovery adds sub-b's two namespaces and skips sub-a's, recorded.
	out = a.ok("2 namespaces added from 2 subsystems", "ns", "discover", "tcp://"+addr, "--host", "h4")
	if !strings.Contains(out, "already recorded as h3-n1") || labelOf(t, devs["b2"]).Namespace != "h4-n2" {
		t.Fatalf("discover:\n%s", out)
	}
	// Another cluster must not take a namespace labelled by this one.
	b := adminCLI{t: t, etcd: ep, cluster: "other"}
	b.ok("initialized", "cluster", "init", "--slot-size", "1MiB")
	b.ok("added", "host", "add", "h3")
	b.fails("label does not match", "ns", "add", "--host", "h3", "--nqn", "nqn.2024-01.io.test:sub-a", "--nsid", "1", "--path", "tcp://"+addr)

	var nss []meta.NamespaceUse
	if err := json.Unmarshal([]byte(a.ok("h4-n2", "ns", "ls", "--json")), &nss); err != nil || len(nss) != 6 || nss[0].CapacityBytes != 63<<20 {
		t.Fatalf("ns ls --json: %+v %v", nss, err)
	}
	a.ok("h0-n1 is now draining", "ns", "set-state", "h0-n1", "draining")
	a.fails("unknown namespace state", "ns", "set-state", "h0-n1", "sleepy")
	a.ok("draining", "ns", "ls")

	// Volumes. h0 is draining: four domains in service (h1..h4).
	a.fails("needs 6 failure domains, the cluster has 4", "volume", "create", "big", "--size", "1GiB", "--k", "4", "--m", "2")
	a.ok("volume big created", "volume", "create", "big", "--size", "1GiB", "--k", "4", "--m", "2", "--allow-shared-domains")
	a.fails("must be a positive multiple of 4096 bytes", "volume", "create", "odd", "--size", "1000", "--k", "2", "--m", "1")
	a.fails("chunk", "volume", "create", "odd", "--size", "4MiB", "--k", "2", "--m", "1", "--chunk", "3KiB")
	a.ok("volume v1 created: 8 MiB, 2+1, chunk 64 KiB", "volume", "create", "v1", "--size", "8MiB", "--k", "2", "--m", "1", "--chunk", "64KiB")
	a.fails("already exists", "volume", "create", "v1", "--size", "8MiB", "--k", "2", "--m", "1")
	a.ok("v1", "volume", "ls")
	a.ok("volume v1 is now 16 MiB", "volume", "resize", "v1", "--size", "16MiB")
	a.fails("shrinking", "volume", "resize", "v1", "--size", "4MiB")

	vm, err := c.VolumeMap(context.Background(), "v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vm.Allocate(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	owner, err := c.Acquire(context.Background(), "v1", meta.OwnerOptions{Holder: "node-1", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var info meta.VolumeInfo
	if err := json.Unmarshal([]byte(a.ok("node-1", "volume", "info", "v1", "--json")), &info); err != nil ||
		info.Segments != 11 || info.Allocated != 1 || len(info.Owners) != 1 { // 11: each 1 MiB slot ends in a chunk of checksums and 3 of write log

		t.Fatalf("volume info --json: %+v %v", info, err)
	}
	a.fails("is mapped (rw by node-1", "volume", "rm", "v1")
	_ = owner.Release(context.Background())
	a.ok("not mapped", "volume", "info", "v1")
	a.ok("format 4: crc32c per 4 KiB block bound to its place, partial-parity write log", "volume", "info", "v1")
	a.ok("volume v1 removed", "volume", "rm", "v1")
	a.fails("not found", "volume", "info", "v1")
}

func TestAdminEtcdUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	_, _, err = run(t, "volume", "ls", "--etcd", addr, "--etcd-timeout", "300ms")
	if err == nil || !strings.Contains(err.Error(), "etcd unreachable at "+addr) || !strings.Contains(err.Error(), "nvstripe etcd --dir") {
		t.Fatalf("got %v; want an error naming %s and saying what to do", err, addr)
	}
	_, _, err = run(t, "volume", "ls", "--etcd", addr, "--etcd-user", "root")
	if ExitCode(err) != 2 {
		t.Fatalf("user without password: %v (exit %d)", err, ExitCode(err))
	}
}

func TestEtcdCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	p, _ := net.Listen("tcp", "127.0.0.1:0")
	client, peer := l.Addr().String(), p.Addr().String()
	_, _ = l.Close(), p.Close()
	done := make(chan error, 1)
	var out strings.Builder
	go func() {
		done <- Run(ctx, []string{"etcd", "--dir", dir, "--listen", client, "--peer-listen", peer}, &out, &out)
	}()
	var s *meta.Store
	var err error
	for range 100 {
		if s, err = meta.Open(ctx, meta.Config{Endpoints: []string{client}, DialTimeout: time.Second}); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("etcd command never served: %v", err)
	}
	if _, err := s.InitCluster(ctx, meta.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("etcd command: %v", err)
	}
	if _, _, err := run(t, "etcd"); ExitCode(err) != 2 {
		t.Fatalf("etcd without --dir: %v", err)
	}
}
