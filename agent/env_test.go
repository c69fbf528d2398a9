package agent

import (
	"context"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/memetcd"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/volclient"
	"github.com/nvstripe/nvstripe/volclient/volclienttest"
)

// agentEnv is an etcd (in memory unless a test needs a real one), three userspace NVMe/TCP targets on 127.0.0.1 (one
// host each, one in-memory namespace each behind a fault injector),
// registered and labelled, and a 2+1 volume "v" of envVolSize bytes.
type agentEnv struct {
	store  *meta.Store
	eps    []string        // a real etcd's endpoints
	mem    *memetcd.Server // or the in-memory etcd
	faults []*faultdev.Dev
	nsIDs  []string
	// proxy and proxied are set by newAgentEnvProxied.
	proxy   *tcpProxy
	proxied *meta.Store
}

const (
	envVolSize  = 16 << 20
	envSlotSize = 1 << 20
	envNSSize   = 32 << 20
)

func newAgentEnv(t *testing.T) *agentEnv {
	t.Helper()
	e := &agentEnv{mem: metatest.Mem(t)}
	e.setUp(t, storetest.OpenMem(t, e.mem, meta.Config{}))
	return e
}

// newAgentEnvEtcd is newAgentEnv on a real (embedded) etcd, for a test of
// the etcd connection itself.
func newAgentEnvEtcd(t *testing.T) *agentEnv {
	t.Helper()
	e := &agentEnv{eps: metatest.Start(t)}
	e.setUp(t, storetest.Open(t, meta.Config{Endpoints: e.eps}))
	return e
}

// compact compacts the etcd's history up to a new revision.
func (e *agentEnv) compact(t *testing.T) {
	if e.mem == nil {
		metatest.Compact(t, e.eps)
		return
	}
	metatest.CompactMem(t, e.mem)
}

// newAgentEnvProxied also puts a TCP proxy between the agent's store
// (e.proxied) and etcd, so that a test can cut the agent off etcd (a network
// partition: etcd and its lease timers keep running) and let it back.
func newAgentEnvProxied(t *testing.T) *agentEnv {
	t.Helper()
	e := newAgentEnvEtcd(t)
	e.proxy = startProxy(t, strings.TrimPrefix(e.eps[0], "http://"))
	e.proxied = storetest.Open(t, meta.Config{Endpoints: []string{e.proxy.addr}})
	return e
}

// tcpProxy forwards connections to one address until cut.
type tcpProxy struct {
	t      *testing.T
	to     string
	addr   string
	mu     sync.Mutex
	l      net.Listener
	conns  []net.Conn
	closed bool
}

func startProxy(t *testing.T, to string) *tcpProxy {
	p := &tcpProxy{t: t, to: to, addr: "127.0.0.1:0"}
	p.listen()
	t.Cleanup(p.cut)
	return p
}

// listen (again) on p.addr.
func (p *tcpProxy) listen() {
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.l, p.addr = l, l.Addr().String()
	p.mu.Unlock()
	go p.accept(l)
}

func (p *tcpProxy) accept(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.to)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go func() { io.Copy(u, c); u.Close() }()
		go func() { io.Copy(c, u); c.Close() }()
	}
}

// cut closes the listener and every forwarded connection.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.l.Close()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// setUp records the targets and the volume through store.
func (e *agentEnv) setUp(t *testing.T, store *meta.Store) {
	t.Helper()
	e.store = store
	c := storetest.Init(t, store, meta.InitOptions{SlotSize: envSlotSize})
	for i := range 3 {
		e.addTarget(t, c, i)
	}
	if _, err := store.CreateVolume(context.Background(), meta.VolumeSpec{Name: "v", Size: envVolSize,
		Layout: meta.Layout{K: 2, M: 1, Chunk: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
}

func (e *agentEnv) addTarget(t *testing.T, c *meta.ClusterRecord, i int) {
	t.Helper()
	mem, err := blockdev.NewMem(envNSSize, 4096)
	if err != nil {
		t.Fatal(err)
	}
	fd := faultdev.New(mem, int64(i))
	_, rec := volclienttest.ServeNamespace(t, e.store, c, i, fd)
	e.faults, e.nsIDs = append(e.faults, fd), append(e.nsIDs, rec.ID)
}

// options are agent options for tests: fast retries and timeouts, logs to t.
func (e *agentEnv) options(t *testing.T, stateDir string) Options {
	return Options{Store: e.store, Holder: "agent-test", StateDir: stateDir, RetryInterval: 100 * time.Millisecond,
		Namespaces: volclient.NamespaceOptions{ControllerLossTimeout: time.Second, ConnectTimeout: 2 * time.Second},
		Logf:       t.Logf}
}

// newAgent starts an agent closed at the end of the test.
func (e *agentEnv) newAgent(t *testing.T, o Options) *Agent {
	t.Helper()
	// The test's temporary directories are removed by a cleanup registered
	// at the first t.TempDir: registered before the agent's, it runs after
	// the agent is closed and has unmounted what it mounted there.
	_ = t.TempDir()
	a, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Close(ctx)
	})
	return a
}

// waitFor is testutil.WaitFor under this package's old name.
var waitFor = testutil.WaitFor

// needTool skips t when an NBD client tool is missing.
func needTool(t *testing.T, tool string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		t.Skipf("%s not installed (apt-get install libnbd-bin): %v", tool, err)
	}
}

// counters gathers the counter family name from m's registry: each
// series' value under the values of labels, joined by "/" (a missing
// series reads 0).
func counters(t *testing.T, m *Metrics, name string, labels ...string) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			var key []string
			for _, name := range labels {
				key = append(key, l[name])
			}
			out[strings.Join(key, "/")] = s.GetCounter().GetValue()
		}
	}
	return out
}

// metricValue finds the value of one sample line "name{labels} value" in a
// Prometheus text exposition; labels must match exactly as printed.
func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	for line := range strings.Lines(text) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return v
		}
	}
	t.Fatalf("metric %s not found in:\n%s", series, text)
	return 0
}
