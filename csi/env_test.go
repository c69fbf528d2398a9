package csi

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/volclient"
	"github.com/nvstripe/nvstripe/volclient/volclienttest"
)

// cluster is an etcd and three userspace NVMe/TCP targets on 127.0.0.1 (one
// host each, one sparse in-memory namespace each), registered and labelled.
type cluster struct {
	store     *meta.Store
	endpoints []string
}

const (
	testSlotSize = 16 << 20
	testNSSize   = 4 << 30 // sparse: only written pages take memory
)

// needNode skips t where the node service cannot work: not root, or no
// FUSE, loop devices or the tools the driver runs.
func needNode(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the node service mounts and attaches loop devices: run as root")
	}
	for _, dev := range []string{"/dev/fuse", "/dev/loop-control"} {
		if _, err := os.Stat(dev); err != nil {
			t.Skipf("%s is missing (the driver's FUSE + loop way needs it): %v", dev, err)
		}
	}
	for _, tool := range []string{"blkid", "losetup", "mkfs.ext4", "resize2fs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install util-linux e2fsprogs): %v", tool, err)
		}
	}
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	eps := metatest.Start(t)
	return startClusterOn(t, storetest.Open(t, meta.Config{Endpoints: eps}), eps)
}

// startMemCluster is startCluster on an in-memory etcd, for the
// controller alone (an agent process needs etcd's endpoints).
func startMemCluster(t *testing.T) *cluster {
	t.Helper()
	return startClusterOn(t, storetest.OpenMem(t, metatest.Mem(t), meta.Config{}), nil)
}

func startClusterOn(t *testing.T, store *meta.Store, eps []string) *cluster {
	t.Helper()
	c := storetest.Init(t, store, meta.InitOptions{SlotSize: testSlotSize})
	for i := range 3 {
		mem, err := blockdev.NewMem(testNSSize, 4096)
		if err != nil {
			t.Fatal(err)
		}
		volclienttest.ServeNamespace(t, store, c, i, mem)
	}
	return &cluster{store: store, endpoints: eps}
}

// nodeAgent is an agent serving its API on a unix socket, restartable.
type nodeAgent struct {
	t      *testing.T
	o      agent.ServeOptions
	agent  *agent.Agent // the running agent, set by start
	cancel context.CancelFunc
	done   chan error
}

func (c *cluster) startAgent(t *testing.T, holder string) *nodeAgent {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() { detachUnder(t, dir) })
	a := &nodeAgent{t: t, o: agent.ServeOptions{Socket: filepath.Join(dir, "agent.sock"), Options: agent.Options{
		Store: c.store, Holder: holder, StateDir: filepath.Join(dir, "state"), RetryInterval: 100 * time.Millisecond,
		Namespaces: volclient.NamespaceOptions{ControllerLossTimeout: time.Second, ConnectTimeout: 2 * time.Second},
		Logf:       t.Logf}}}
	a.start()
	t.Cleanup(a.stop)
	return a
}

// start serves the agent and waits until its API is up.
func (a *nodeAgent) start() {
	a.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	o := a.o
	o.Ready = func(ag *agent.Agent, _ string) { a.agent = ag; close(ready) }
	a.cancel, a.done = cancel, make(chan error, 1)
	go func() { a.done <- agent.Serve(ctx, o) }()
	select {
	case <-ready:
	case err := <-a.done:
		a.t.Fatalf("agent: %v", err)
	}
}

// stop stops the agent (its mappings stay recorded for the next start).
func (a *nodeAgent) stop() {
	if a.cancel == nil {
		return
	}
	a.cancel()
	if err := <-a.done; err != nil && !errors.Is(err, context.Canceled) {
		a.t.Logf("agent stopped: %v", err)
	}
	a.cancel = nil
}

// plugin is a driver serving on a unix socket, with a client of it.
type plugin struct {
	d      *Driver
	sock   string
	cancel context.CancelFunc
	done   chan error
	conn   *grpc.ClientConn
	ctrl   csipb.ControllerClient
	node   csipb.NodeClient
}

func (c *cluster) startPlugin(t *testing.T, nodeID, agentSocket, stateDir string) *plugin {
	t.Helper()
	d, err := New(Options{Store: c.store, NodeID: nodeID, Agent: agentSocket, StateDir: stateDir, Frontend: FrontendFUSE,
		Log: slog.New(slog.NewTextHandler(testLog{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	p := &plugin{d: d, sock: filepath.Join(t.TempDir(), "csi.sock"), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	ready := make(chan struct{})
	go func() { p.done <- d.Serve(ctx, "unix://"+p.sock, func(string) { close(ready) }) }()
	select {
	case <-ready:
	case err := <-p.done:
		t.Fatalf("plugin: %v", err)
	}
	if p.conn, err = grpc.NewClient("unix://"+p.sock, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
	p.ctrl, p.node = csipb.NewControllerClient(p.conn), csipb.NewNodeClient(p.conn)
	t.Cleanup(p.stop)
	return p
}

// stop stops serving (what a restart of the node plugin does).
func (p *plugin) stop() {
	if p.cancel == nil {
		return
	}
	p.conn.Close()
	p.cancel()
	<-p.done
	p.cancel = nil
}

// testLog writes log lines to t.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// capability is a Mount (ext4) or Block capability with mode.
func capability(block bool, mode csipb.VolumeCapability_AccessMode_Mode) *csipb.VolumeCapability {
	c := &csipb.VolumeCapability{AccessMode: &csipb.VolumeCapability_AccessMode{Mode: mode}}
	if block {
		c.AccessType = &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: "ext4"}}
	}
	return c
}

// detachUnder detaches the loop devices over files under dir and lazily
// unmounts what is left mounted there (a failed test's leftovers). Loop
// devices first: once their FUSE mount is detached they no longer show
// their file's path.
func detachUnder(t *testing.T, dir string) {
	paths, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && strings.HasPrefix(string(b), dir+"/") {
			exec.Command("losetup", "-d", "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(p)))).Run()
		}
	}
	out, _ := exec.Command("sh", "-c", `grep -o " `+dir+`[^ ]*" /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l`).CombinedOutput()
	if len(out) > 0 {
		t.Logf("unmounting under %s: %s", dir, out)
	}
}
