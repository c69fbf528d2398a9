package targetd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/health/pool"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

func options(dir string) Options {
	return Options{Files: target.FileSpec{Dir: dir, NQN: "nqn.2024-01.io.nvstripe:t", Listen: []string{"127.0.0.1:0"},
		Namespaces: []string{"data0:1MiB", "data1:2MiB"}, AllowHosts: []string{"any"}, BlockSize: 4096}}
}

// mustStart starts the daemon with o; a failure ends the test.
func mustStart(t *testing.T, o Options) *Daemon {
	t.Helper()
	d, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStartServesEveryPart starts the daemon with control API, metrics and
// gossip, and checks each answers.
func TestStartServesEveryPart(t *testing.T) {
	o := options(t.TempDir())
	o.Control, o.Metrics = "127.0.0.1:0", "127.0.0.1:0"
	o.Gossip, o.Host = pool.Spec{Addr: "127.0.0.1:0", Profile: "test"}, "h1"
	d := mustStart(t, o)
	defer d.Close()
	r := d.Ready()
	if !r.Ready || r.Control == "" || r.Metrics == "" || r.Gossip == "" || len(r.Target.Listeners) != 1 {
		t.Fatalf("ready %+v: want every address", r)
	}
	if ns := r.Target.Subsystems[0].Namespaces; len(ns) != 2 || ns[1].Name != "data1" || ns[1].Size != 2<<20 {
		t.Fatalf("namespaces %+v", ns)
	}
	if r.ControlTokenFile != filepath.Join(o.Files.Dir, ControlTokenName) {
		t.Fatalf("control token file %q, want DIR/%s", r.ControlTokenFile, ControlTokenName)
	}
	token, err := config.ReadSecretFile("token", r.ControlTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	states, err := target.ControlClient{Addr: r.Control, Token: token}.ANAStates(context.Background())
	if err != nil || len(states) == 0 {
		t.Fatalf("control API: %v %v", states, err)
	}
	if m, err := testutil.Metrics(t.Context(), "http://"+r.Metrics+"/metrics"); err != nil || len(m) == 0 {
		t.Fatalf("metrics: %d samples, %v", len(m), err)
	}
	text := r.String()
	for _, want := range []string{"control: http://" + r.Control + " (token in " + r.ControlTokenFile + ")", "gossip: " + r.Gossip, "metrics: http://" + r.Metrics + "/metrics", "ns 2: data1"} {
		if !strings.Contains(text, want) {
			t.Errorf("ready text lacks %q:\n%s", want, text)
		}
	}
	if !strings.HasSuffix(text, "\nready") {
		t.Errorf("ready text does not end in ready:\n%s", text)
	}
	js, _ := json.Marshal(r)
	if !strings.HasPrefix(string(js), `{"control":`) || !strings.Contains(string(js), `"ready":true`) {
		t.Errorf("ready JSON %s", js)
	}
}

// TestCloseStopsEverything checks Close stops the listeners.
func TestCloseStopsEverything(t *testing.T) {
	o := options(t.TempDir())
	o.Control = "127.0.0.1:0"
	d := mustStart(t, o)
	addr := d.Ready().Control
	d.Close()
	if _, err := (target.ControlClient{Addr: addr, Token: "x"}).ANAStates(context.Background()); err == nil {
		t.Fatal("control API still answers after Close")
	}
}

// TestBadGossipBeforeFiles checks a gossip mistake is a spec error found
// before any namespace file is created.
func TestBadGossipBeforeFiles(t *testing.T) {
	dir := t.TempDir()
	o := options(dir)
	o.Gossip = pool.Spec{Addr: "127.0.0.1:0", Profile: "test"} // no Host
	_, err := Start(context.Background(), o)
	if !errors.Is(err, pool.ErrSpec) || !IsSpec(err) {
		t.Fatalf("gossip without a host: %v, want pool.ErrSpec", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data0.img")); !os.IsNotExist(err) {
		t.Fatalf("namespace file created before the gossip check: %v", err)
	}
	o = options(dir)
	o.Files.Namespaces = []string{"data0:xx"}
	if _, err := Start(context.Background(), o); !IsSpec(err) {
		t.Fatalf("bad size: %v, want a spec error", err)
	}
}

// TestFlagsOptions: the flags' defaults, the listeners split, and the
// control token read only with --control (an empty token file is a usage
// mistake).
func TestFlagsOptions(t *testing.T) {
	var f Flags
	fl := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.AddFlags(fl)
	empty := filepath.Join(t.TempDir(), "token")
	os.WriteFile(empty, []byte("\n"), 0o600)
	if err := fl.Parse([]string{"--listen", "127.0.0.1:1,127.0.0.1:2", "--control-token-file", empty}); err != nil {
		t.Fatal(err)
	}
	o, err := f.Options()
	if err != nil || len(o.Files.Listen) != 2 || o.Files.BlockSize != 4096 || o.MaxConnections != target.DefaultMaxConnections || o.Gossip.Profile != "lan" ||
		o.AuthTimeout != 5*time.Second {
		t.Errorf("options %+v %v", o, err)
	}
	f.Control = "127.0.0.1:0"
	if _, err := f.Options(); !config.IsUsage(err) {
		t.Errorf("--control with an empty token file: %v, want a usage mistake", err)
	}
}

// TestFlagsHostWeights: --host-weight HOSTNQN=W reaches the options; a
// weight out of range or without a host is a usage mistake.
func TestFlagsHostWeights(t *testing.T) {
	parse := func(args ...string) (Options, error) {
		var f Flags
		fl := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f.AddFlags(fl)
		if err := fl.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f.Options()
	}
	o, err := parse("--host-weight", "nqn.a=3", "--host-weight", "nqn.b=1", "--device-queue-depth", "8")
	if err != nil || o.HostWeights["nqn.a"] != 3 || o.HostWeights["nqn.b"] != 1 || len(o.HostWeights) != 2 || o.DeviceQueueDepth != 8 {
		t.Errorf("weights %v depth %d, err %v", o.HostWeights, o.DeviceQueueDepth, err)
	}
	for _, bad := range []string{"nqn.a=0", "nqn.a=101", "=2", "nqn.a", "nqn.a=x"} {
		if _, err := parse("--host-weight", bad); !config.IsUsage(err) {
			t.Errorf("--host-weight %s: %v, want a usage mistake", bad, err)
		}
	}
}

// TestFlagsTLSMode: an unknown --tls mode is a usage mistake that names
// the flag and the modes it takes, not a bad namespace specification.
func TestFlagsTLSMode(t *testing.T) {
	var f Flags
	fl := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.AddFlags(fl)
	if err := fl.Parse([]string{"--tls", "maybe"}); err != nil {
		t.Fatal(err)
	}
	_, err := f.Options()
	if !config.IsUsage(err) || IsSpec(err) {
		t.Fatalf("--tls=maybe: %v, want a usage mistake that is no namespace specification's", err)
	}
	for _, want := range []string{"--tls", `"maybe"`, "off, on or require"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("--tls=maybe: %q does not say %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "namespace") {
		t.Errorf("--tls=maybe: %q speaks of namespaces", err)
	}
}

// TestControlToken: without a token in the options, the daemon creates
// DIR/control.token (mode 0600) and serves its token; a restart keeps it;
// a token file others may read is a usage mistake and nothing is served.
// Before, a control API on loopback served anyone without a token.
func TestControlToken(t *testing.T) {
	o := options(t.TempDir())
	o.Control = "127.0.0.1:0"
	d := mustStart(t, o)
	path := filepath.Join(o.Files.Dir, ControlTokenName)
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v, want mode 0600", st, err)
	}
	token, err := config.ReadSecretFile("token", path)
	if err != nil || len(token) != 64 {
		t.Fatalf("token %q %v, want 64 hex digits", token, err)
	}
	addr := d.Ready().Control
	ctx := context.Background()
	if err := (target.ControlClient{Addr: addr, Token: "wrong"}).SetANAState(ctx, "0", 1, "inaccessible"); err == nil {
		t.Error("a wrong token changed the state")
	}
	resp, err := http.Get("http://" + addr + "/v1/ana")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET without a token: %s, want 401", resp.Status)
	}
	if st, _ := d.Target.ANAState(0, 1); st.String() != "optimized" {
		t.Fatalf("state after refused requests: %v", st)
	}
	if err := (target.ControlClient{Addr: addr, Token: token}).SetANAState(ctx, "0", 1, "inaccessible"); err != nil {
		t.Fatal(err)
	}
	d.Close()

	d = mustStart(t, o)
	if _, err := (target.ControlClient{Addr: d.Ready().Control, Token: token}).ANAStates(ctx); err != nil {
		t.Errorf("token after a restart: %v", err)
	}
	d.Close()

	os.Chmod(path, 0o644)
	if _, err := Start(context.Background(), o); !IsSpec(err) {
		t.Fatalf("token file mode 0644: %v, want a usage mistake", err)
	}
}

// TestCloseFlushesNamespaces: the daemon's stop writes out what the target
// acknowledged without a Flush (its volatile write cache), so it survives
// a power loss after the stop: a crash clone of each namespace taken after
// closeNamespaces holds the write. Before, the files were closed without a
// flush and the clone held zeros.
func TestCloseFlushesNamespaces(t *testing.T) {
	var nss []target.NamespaceConfig
	want := bytes.Repeat([]byte{0x5a}, 4096)
	for i := range 2 {
		m, err := blockdev.NewCrashableMem(1<<20, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.WriteAt(t.Context(), want, 8192); err != nil {
			t.Fatal(err)
		}
		nss = append(nss, target.NamespaceConfig{NSID: uint32(i + 1), Name: fmt.Sprintf("d%d", i), Device: m})
	}
	closeNamespaces(nss, t.Logf)
	for _, ns := range nss {
		got := make([]byte, len(want))
		if err := ns.Device.(*blockdev.Mem).CrashClone().ReadAt(t.Context(), got, 8192); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("namespace %s: a write acknowledged before the stop is lost at a power loss after it", ns.Name)
		}
	}
}
