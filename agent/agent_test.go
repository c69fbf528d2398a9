package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/internal/faultnet"
	"github.com/nvstripe/nvstripe/internal/rpctest"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nbd"
	"github.com/nvstripe/nvstripe/volclient"
)

func randBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// mapListen maps volume v on an NBD listener at a free loopback port and
// returns the mapping and the device it serves, failing t on error.
func mapListen(t *testing.T, a *Agent) (*api.Mapping, *servedDev) {
	t.Helper()
	m, err := a.Map(context.Background(), Spec{Volume: "v", Via: ViaNBDListen, Where: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	return m, served(t, a, "v")
}

// startServing runs serve in a goroutine until it calls ready, and returns
// what it passed to ready and a channel that yields serve's result. It fails
// t when serve returns first.
func startServing(t *testing.T, serve func(ready func(string)) error) (string, <-chan error) {
	t.Helper()
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- serve(func(s string) { ready <- s }) }()
	select {
	case s := <-ready:
		return s, done
	case err := <-done:
		t.Fatalf("serving ended before it was ready: %v", err)
		return "", nil
	}
}

// served returns the device a mapping serves (what NBD and FUSE clients
// reach), failing t when the volume is not served.
func served(t *testing.T, a *Agent, name string) *servedDev {
	t.Helper()
	a.mu.Lock()
	mp := a.maps[name]
	a.mu.Unlock()
	if mp == nil {
		t.Fatalf("%s is not mapped", name)
	}
	mp.mu.Lock()
	defer mp.mu.Unlock()
	if mp.dev == nil {
		t.Fatalf("%s is not served (state %s, %v)", name, mp.state, mp.err)
	}
	return mp.dev
}

func owners(t *testing.T, s *meta.Store, volume string) []string {
	t.Helper()
	os, err := s.Owners(context.Background(), volume)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range os {
		out = append(out, o.Holder)
	}
	return out
}

// TestServeMapOverGRPC runs the daemon (Serve), maps a volume over its gRPC
// socket, copies 16 MiB of random data in and out with nbdcopy, checks List,
// Status and the metrics endpoint, unmaps, and checks that another owner can
// then take the volume.
func TestServeMapOverGRPC(t *testing.T) {
	needTool(t, "nbdcopy")
	e := newAgentEnvEtcd(t) // Status names etcd's endpoints
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "agent.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	metricsAddr, done := startServing(t, func(ready func(string)) error {
		return Serve(ctx, ServeOptions{Options: e.options(t, filepath.Join(dir, "state")), Socket: sock,
			MetricsAddr: "127.0.0.1:0", Ready: func(_ *Agent, m string) { ready(m) }})
	})
	c, err := api.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rpctest.CheckStandard(t, c.Conn(), api.ServiceName) // what `grpcurl -unix SOCKET list` asks

	rep, err := c.Map(ctx, &api.MapRequest{Volume: "v", NbdListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Mapping
	if m.State != api.StateServing || !strings.HasPrefix(m.Url, "nbd://127.0.0.1:") || !strings.HasSuffix(m.Url, "/v") || m.Size != envVolSize {
		t.Fatalf("mapping %+v", m)
	}
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	data := randBytes(t, envVolSize)
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.Exec(t, "nbdcopy", src, m.Url)
	testutil.Exec(t, "nbdcopy", m.Url, dst)
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("nbdcopy read back different data")
	}

	checkListAndStatus(t, c)
	checkMetrics(t, metricsAddr)

	if _, err := c.Unmap(ctx, &api.UnmapRequest{Volume: "v"}); err != nil {
		t.Fatal(err)
	}
	if l, err := c.List(ctx, &api.ListRequest{}); err != nil || len(l.Mappings) != 0 {
		t.Fatalf("after unmap: %+v, %v", l, err)
	}
	o, err := e.store.Acquire(ctx, "v", meta.OwnerOptions{Holder: "other"})
	if err != nil {
		t.Fatalf("another owner cannot take the unmapped volume: %v", err)
	}
	o.Release(ctx)

	_, err = c.Unmap(ctx, &api.UnmapRequest{Volume: "v"})
	if !errors.Is(err, api.ErrNotFound) {
		t.Errorf("unmap of an unmapped volume: %v, want ErrNotFound", err)
	}
	_, err = c.Map(ctx, &api.MapRequest{Volume: "v", NbdListen: "127.0.0.1:0", FuseDir: "/mnt"})
	if !errors.Is(err, api.ErrInvalid) {
		t.Errorf("map with two frontends: %v, want ErrInvalid", err)
	}
	_, err = c.Map(ctx, &api.MapRequest{Volume: "nosuch", NbdListen: "127.0.0.1:0"})
	if !errors.Is(err, api.ErrNotFound) {
		t.Errorf("map of a missing volume: %v, want ErrNotFound", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind after shutdown: %v", err)
	}
}

func checkListAndStatus(t *testing.T, c *api.Client) {
	t.Helper()
	l, err := c.List(context.Background(), &api.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Mappings) != 1 {
		t.Fatalf("list: %+v", l)
	}
	s := l.Mappings[0].Stats
	if s.WriteBytes < envVolSize || s.ReadBytes < envVolSize || s.Errors != 0 || l.Mappings[0].Epoch == 0 {
		t.Errorf("list after copying %d bytes in and out: %+v", envVolSize, l.Mappings[0])
	}
	st, err := c.Status(context.Background(), &api.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Holder != "agent-test" || st.Mappings[api.StateServing] != 1 || st.Metrics == "" || len(st.Etcd) == 0 {
		t.Errorf("status: %+v", st)
	}
}

func checkMetrics(t *testing.T, addr string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, series := range []string{
		`nvstripe_agent_io_bytes_total{op="write",volume="v"}`,
		`nvstripe_agent_io_bytes_total{op="read",volume="v"}`,
	} {
		if v := metricValue(t, text, series); v < envVolSize {
			t.Errorf("%s = %v, want >= %d", series, v, envVolSize)
		}
	}
	for _, series := range []string{
		`nvstripe_agent_io_ops_total{op="write",volume="v"}`,
		`nvstripe_agent_io_latency_seconds_count{op="read",volume="v"}`,
		`nvstripe_agent_mapping_state{state="serving",volume="v"}`,
		`nvstripe_agent_owner_epoch{volume="v"}`,
	} {
		if v := metricValue(t, text, series); v <= 0 {
			t.Errorf("%s = %v, want > 0", series, v)
		}
	}
}

// TestRestartRestoresMappings closes an agent (a restart) and starts another
// on the same state directory: it serves the volume again at the same
// address, with the data written before.
func TestRestartRestoresMappings(t *testing.T) {
	e := newAgentEnv(t)
	ctx := context.Background()
	state := t.TempDir()
	a := e.newAgent(t, e.options(t, state))
	m, dev := mapListen(t, a)
	data := randBytes(t, 1<<20)
	if err := dev.WriteAt(ctx, data, 3<<20); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if o := owners(t, e.store, "v"); len(o) != 0 {
		t.Fatalf("owners after the agent stopped: %v", o)
	}

	b := e.newAgent(t, e.options(t, state))
	<-b.Restored()
	l := b.List()
	if len(l) != 1 || l[0].State != api.StateServing || l[0].Url != m.Url || l[0].Where != m.Where {
		t.Fatalf("restored %+v, want %s serving at %s", l, m.Volume, m.Url)
	}
	if o := owners(t, e.store, "v"); !slices.Equal(o, []string{"agent-test"}) {
		t.Errorf("owners after restore: %v", o)
	}
	got := make([]byte, len(data))
	if err := served(t, b, "v").ReadAt(ctx, got, 3<<20); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("data after restart: err %v, equal %v", err, bytes.Equal(got, data))
	}
}

// TestRestoreRetriesWhileOwnedElsewhere restarts an agent while another
// holder owns its volume: the mapping is retrying (saying who owns it) and
// is served as soon as the other owner lets go.
func TestRestoreRetriesWhileOwnedElsewhere(t *testing.T) {
	e := newAgentEnv(t)
	ctx := context.Background()
	state := t.TempDir()
	a := e.newAgent(t, e.options(t, state))
	mapListen(t, a)
	a.Close(ctx)
	other, err := e.store.Acquire(ctx, "v", meta.OwnerOptions{Holder: "intruder"})
	if err != nil {
		t.Fatal(err)
	}
	b := e.newAgent(t, e.options(t, state))
	<-b.Restored()
	l := b.List()
	if len(l) != 1 || l[0].State != api.StateRetrying || !strings.Contains(l[0].Error, "intruder") {
		t.Fatalf("restored while owned elsewhere: %+v", l)
	}
	other.Release(ctx)
	waitFor(t, "the mapping to be served", func() bool { return b.List()[0].State == api.StateServing })
}

// TestUnmapReleasesLeaseAndForgets: after Unmap another owner can take the
// volume, and a restarted agent does not map it again.
func TestUnmapReleasesLeaseAndForgets(t *testing.T) {
	e := newAgentEnv(t)
	ctx := context.Background()
	state := t.TempDir()
	a := e.newAgent(t, e.options(t, state))
	if _, err := a.Map(ctx, Spec{Volume: "v", Via: ViaNBDListen, Where: "unix:" + filepath.Join(state, "v.sock")}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Map(ctx, Spec{Volume: "v", Via: ViaNBDListen, Where: "127.0.0.1:0"}); !errors.Is(err, api.ErrExists) {
		t.Errorf("second map of the same volume: %v, want ErrExists", err)
	}
	if err := a.Unmap(ctx, "v"); err != nil {
		t.Fatal(err)
	}
	o, err := e.store.Acquire(ctx, "v", meta.OwnerOptions{Holder: "other"})
	if err != nil {
		t.Fatalf("acquire after unmap: %v", err)
	}
	defer o.Release(ctx)
	if _, err := os.Stat(filepath.Join(state, "v.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("NBD socket left after unmap: %v", err)
	}
	a.Close(ctx)
	b := e.newAgent(t, e.options(t, state))
	<-b.Restored()
	if l := b.List(); len(l) != 0 {
		t.Errorf("restarted agent restored an unmapped volume: %+v", l)
	}
}

// TestMapKernelNBDWithoutDriver: where the nbd driver is missing, mapping on
// /dev/nbdN fails with nbd.ErrNoKernelNBD's message, before taking the
// lease.
func TestMapKernelNBDWithoutDriver(t *testing.T) {
	if kernelNBDPresent("/dev/nbd0") {
		t.Skip("the nbd driver is present here; this test checks the message where it is missing")
	}
	e := newAgentEnv(t)
	a := e.newAgent(t, e.options(t, ""))
	_, err := a.Map(context.Background(), Spec{Volume: "v", Via: ViaNBDDevice, Where: "/dev/nbd0"})
	if !errors.Is(err, nbd.ErrNoKernelNBD) || !strings.Contains(err.Error(), "modprobe nbd") {
		t.Fatalf("map on /dev/nbd0 without nbd: %v", err)
	}
	if !errors.Is(classify(err), api.ErrUnsupported) {
		t.Errorf("API class of %v: not ErrUnsupported", err)
	}
	if o := owners(t, e.store, "v"); len(o) != 0 || len(a.List()) != 0 {
		t.Errorf("failed map left owners %v, mappings %+v", o, a.List())
	}
}

// TestMediaErrorsMarkNamespaceFailed: a namespace that answers reads with
// unrecovered read errors is reported failed in etcd; reads still return the
// right data (reconstructed), and List and the metrics count the errors.
func TestMediaErrorsMarkNamespaceFailed(t *testing.T) {
	e := newAgentEnv(t)
	ctx := context.Background()
	a := e.newAgent(t, e.options(t, ""))
	_, dev := mapListen(t, a)
	data := randBytes(t, 2<<20)
	if err := dev.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	bad := e.nsIDs[0]
	e.faults[0].Add(faultdev.Rule{Ops: faultdev.OpRead, Off: envSlotSize, Len: envNSSize, Err: blockdev.ErrCorrupt})
	got := make([]byte, len(data))
	if err := dev.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read with a failing namespace: err %v, equal %v", err, bytes.Equal(got, data))
	}
	waitFor(t, "namespace "+bad+" to be marked failed", func() bool {
		rec, err := e.store.Namespace(ctx, bad)
		return err == nil && rec.State == "failed"
	})
	for _, id := range e.nsIDs[1:] {
		if rec, err := e.store.Namespace(ctx, id); err != nil || rec.State != "in" {
			t.Errorf("healthy namespace %s: %+v, %v", id, rec, err)
		}
	}
	waitFor(t, "List to show the report", func() bool {
		s := a.List()[0].Stats
		return s.NamespaceErrors[bad] > 0 && slices.Equal(s.FailedReported, []string{bad})
	})
	// The reporter counts its report in the metrics after List shows it.
	reports := `nvstripe_agent_namespace_failed_reports_total{namespace="` + bad + `",result="ok"}`
	waitFor(t, "the report counted", func() bool {
		text := gather(t, a.Metrics())
		return strings.Contains(text, reports+" ") && metricValue(t, text, reports) > 0
	})
	text := gather(t, a.Metrics())
	if v := metricValue(t, text, `nvstripe_agent_namespace_errors_total{kind="corrupt",namespace="`+bad+`",volume="v"}`); v <= 0 {
		t.Errorf("namespace error metric %v", v)
	}
	if v := metricValue(t, text, reports); v != 1 {
		t.Errorf("reports metric %v, want 1", v)
	}
}

// gather renders the metrics in the text format, as the endpoint does.
func gather(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := &responseRecorder{header: http.Header{}}
	req, _ := http.NewRequest("GET", "/metrics", nil)
	m.Handler().ServeHTTP(rec, req)
	return rec.body.String()
}

type responseRecorder struct {
	header http.Header
	body   bytes.Buffer
}

func (r *responseRecorder) Header() http.Header         { return r.header }
func (r *responseRecorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *responseRecorder) WriteHeader(int)             {}

// TestLeaseLossFencesMapping cuts the agent off etcd for longer than the
// lease TTL: the lease is lost, the mapping says fenced, IO fails with
// ErrFenced, and another node can take the volume. When etcd is back the
// mapping finds that other owner in the volume's history and stays fenced
// for good, saying so.
func TestLeaseLossFencesMapping(t *testing.T) {
	e := newAgentEnvProxied(t)
	ctx := context.Background()
	o := e.options(t, "")
	o.Store, o.LeaseTTL = e.proxied, 2*time.Second
	a := e.newAgent(t, o)
	_, dev := mapListen(t, a)
	if err := dev.WriteAt(ctx, randBytes(t, 4096), 0); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.WaitLost(cancelled, "v"); err != nil {
		t.Errorf("WaitLost on a serving mapping, context ended: %v", err)
	}
	e.proxy.cut()
	waitFor(t, "the mapping to be fenced", func() bool { return a.List()[0].State == api.StateFenced })
	if l := a.List()[0]; !strings.Contains(l.Error, "lease") {
		t.Errorf("fenced mapping's error %q does not name the lease", l.Error)
	}
	if err := a.WaitLost(cancelled, "v"); err != nil {
		t.Errorf("WaitLost while the mapping may still take its volume again: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.WaitLost(cctx, "other"); err != nil {
		t.Errorf("WaitLost with its context ended: %v", err)
	}
	if err := dev.WriteAt(ctx, randBytes(t, 4096), 0); !errors.Is(err, blockdev.ErrFenced) {
		t.Errorf("write after the lease was lost: %v, want ErrFenced", err)
	}
	if err := dev.ReadAt(ctx, make([]byte, 4096), 0); !errors.Is(err, blockdev.ErrFenced) {
		t.Errorf("read after the lease was lost: %v, want ErrFenced", err)
	}
	waitFor(t, "another owner to take the volume", func() bool {
		o, err := e.store.Acquire(ctx, "v", meta.OwnerOptions{Holder: "successor"})
		if err == nil {
			o.Release(ctx)
		}
		return err == nil
	})
	e.proxy.listen()
	if err := a.WaitLost(ctx, "v"); err == nil || !strings.Contains(err.Error(), "volume v fenced") ||
		!strings.Contains(err.Error(), "successor") || !errors.Is(err, volclient.ErrTakenOver) {
		t.Errorf("WaitLost once etcd is back and the successor is found: %v", err)
	}
	if l := a.List()[0]; l.State != api.StateFenced || !strings.Contains(l.Error, "successor") {
		t.Errorf("mapping taken over: %s, %q; want fenced naming the successor", l.State, l.Error)
	}
	if err := dev.WriteAt(ctx, randBytes(t, 4096), 0); !errors.Is(err, blockdev.ErrFenced) {
		t.Errorf("write to a mapping taken over: %v, want ErrFenced", err)
	}
	uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.Unmap(uctx, "v"); err != nil {
		t.Errorf("unmap of a fenced volume: %v", err)
	}
	if l := a.List(); len(l) != 0 {
		t.Errorf("after unmapping a fenced volume: %+v", l)
	}
}

// TestEtcdStallReacquires stalls etcd (every byte held, as when it is
// stopped with SIGSTOP) for longer than the lease TTL: the mapping is
// fenced; once etcd answers again it takes the volume again with a new
// epoch, through the same frontend, and the data written before reads back.
func TestEtcdStallReacquires(t *testing.T) {
	e := newAgentEnvEtcd(t)
	ctx := context.Background()
	p, err := faultnet.New(strings.TrimPrefix(e.store.Endpoints()[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	proxied, err := meta.Open(ctx, meta.Config{Endpoints: []string{p.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer proxied.Close()
	o := e.options(t, "")
	o.Store, o.LeaseTTL = proxied, 2*time.Second
	a := e.newAgent(t, o)
	m, dev := mapListen(t, a)
	data := randBytes(t, 1<<20)
	if err := dev.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	p.Stall()
	waitFor(t, "the mapping to be fenced", func() bool { return a.List()[0].State == api.StateFenced })
	if err := dev.WriteAt(ctx, data[:4096], 0); !errors.Is(err, blockdev.ErrFenced) {
		t.Fatalf("write while fenced: %v, want ErrFenced", err)
	}
	p.Resume()
	waitFor(t, "the mapping to serve again", func() bool { return a.List()[0].State == api.StateServing })
	l := a.List()[0]
	if l.Epoch <= m.Epoch || l.Error != "" || l.Url != m.Url {
		t.Fatalf("after etcd returned: epoch %d (was %d), error %q, url %s (was %s)", l.Epoch, m.Epoch, l.Error, l.Url, m.Url)
	}
	got := make([]byte, len(data))
	if err := dev.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after taking the volume again: %v, equal %v", err, bytes.Equal(got, data))
	}
	more := randBytes(t, 4096)
	if err := dev.WriteAt(ctx, more, 12<<20); err != nil { // a new segment: etcd again
		t.Fatalf("write after taking the volume again: %v", err)
	}
	owners, err := e.store.Owners(ctx, "v")
	if err != nil || len(owners) != 1 || owners[0].Epoch != l.Epoch {
		t.Fatalf("owners in etcd: %+v, %v; want the new epoch %d only", owners, err, l.Epoch)
	}
}

// TestBriefEtcdOutageKeepsServing cuts the agent off etcd for less than the
// lease TTL: reads and writes to segments already marked dirty go on while
// it is cut off, and afterwards the same lease is still held and new
// segments can be written.
func TestBriefEtcdOutageKeepsServing(t *testing.T) {
	e := newAgentEnvProxied(t)
	ctx := context.Background()
	o := e.options(t, "")
	o.Store = e.proxied // default TTL, 10s
	a := e.newAgent(t, o)
	m, dev := mapListen(t, a)
	data := randBytes(t, 1<<20)
	if err := dev.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	e.proxy.cut()
	// Stay cut off across at least one lease renewal (every TTL/3) but well
	// within the TTL, doing IO all the while.
	octx, cancel := context.WithTimeout(ctx, 10*time.Second) // bounds a hang, not a timing claim
	defer cancel()
	got := make([]byte, len(data))
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); {
		data2 := randBytes(t, 256<<10)
		if err := dev.WriteAt(octx, data2, 256<<10); err != nil {
			t.Fatalf("write to a dirty segment while etcd is unreachable: %v", err)
		}
		copy(data[256<<10:], data2)
		if err := dev.ReadAt(octx, got, 0); err != nil {
			t.Fatalf("read while etcd is unreachable: %v", err)
		}
		if !bytes.Equal(got, data) {
			t.Fatal("read while etcd is unreachable returned other data")
		}
	}
	e.proxy.listen()
	wctx, cancel2 := context.WithTimeout(ctx, 30*time.Second)
	defer cancel2()
	if err := dev.WriteAt(wctx, data[:4096], 12<<20); err != nil { // a new segment: needs etcd again
		t.Fatalf("write to a new segment after etcd returned: %v", err)
	}
	l := a.List()[0]
	if l.State != api.StateServing || l.Epoch != m.Epoch {
		t.Fatalf("after a brief outage: %+v, want serving at epoch %d", l, m.Epoch)
	}
}
