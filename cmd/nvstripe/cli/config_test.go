package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/nvmeof/identity"
)

// TestConfigLayers runs commands with settings from the environment and a
// config file only: `cluster init` reaches etcd through NVSTRIPE_ETCD and
// the file's cluster name, and `config show` names each source.
func TestConfigLayers(t *testing.T) {
	ep := metatest.Start(t)[0]
	path := filepath.Join(t.TempDir(), "nvstripe.yaml")
	if err := os.WriteFile(path, []byte("cluster: fromfile\netcd:\n  endpoints: [127.0.0.1:1]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NVSTRIPE_CONFIG", path)
	t.Setenv("NVSTRIPE_ETCD", ep)
	if out, _, err := run(t, "cluster", "init", "--slot-size", "1MiB"); err != nil || !strings.Contains(out, "cluster fromfile initialized") {
		t.Fatalf("cluster init from env and file: %v\n%s", err, out)
	}
	out, _, err := run(t, "config", "show", "-o", "json", "--cluster", "flagged")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		File     string `json:"config_file"`
		Settings []struct{ Key, Value, Source string }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("config show -o json printed %q: %v", out, err)
	}
	src := map[string]string{}
	for _, s := range got.Settings {
		src[s.Key] = s.Value + " from " + s.Source
	}
	want := map[string]string{"etcd.endpoints": ep + " from env NVSTRIPE_ETCD", "cluster": "flagged from flag --cluster",
		"etcd.cert": " from default"}
	for k, w := range want {
		if src[k] != w {
			t.Errorf("%s = %q, want %q", k, src[k], w)
		}
	}
	if got.File != path {
		t.Errorf("config_file = %q, want %q", got.File, path)
	}
	text, _, err := run(t, "config", "show")
	if err != nil || !strings.Contains(text, "file "+path) && !strings.Contains(text, "env NVSTRIPE_ETCD") {
		t.Errorf("config show: %v\n%s", err, text)
	}
	t.Setenv("NVSTRIPE_CONFIG", filepath.Join(t.TempDir(), "missing.yaml"))
	if _, _, err := run(t, "config", "show"); err == nil {
		t.Error("a named config file that is missing: no error")
	}
}

// TestConfigShowHostNQN: config show prints the host NQN commands connect
// as and where it comes from, not "-" from the default: none yet (where it
// will be generated), then the identity file, then the environment.
func TestConfigShowHostNQN(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(hostIdentityEnv, dir)
	t.Setenv("NVSTRIPE_CONFIG", "")
	t.Setenv("NVSTRIPE_HOST_NQN", "")
	show := func() string {
		t.Helper()
		out, _, err := run(t, "config", "show", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Settings []struct{ Key, Value, Source string }
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("config show -o json printed %q: %v", out, err)
		}
		for _, s := range got.Settings {
			if s.Key == "host_nqn" {
				return s.Value + " from " + s.Source
			}
		}
		t.Fatalf("no host_nqn in %s", out)
		return ""
	}
	file := filepath.Join(dir, "hostnqn")
	if got, want := show(), " from none yet: generated on first use into "+file; got != want {
		t.Errorf("before any identity: host_nqn = %q, want %q", got, want)
	}
	if _, _, err := run(t, "host-identity"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	nqn := strings.TrimSpace(string(b))
	if got, want := show(), nqn+" from file "+file; got != want {
		t.Errorf("with %s: host_nqn = %q, want %q", file, got, want)
	}
	text, _, err := run(t, "config", "show")
	if err != nil || !strings.Contains(text, nqn) {
		t.Errorf("config show (table) does not print %s: %v\n%s", nqn, err, text)
	}
	t.Setenv("NVSTRIPE_HOST_NQN", "nqn.2014-08.org.example:env")
	if got, want := show(), "nqn.2014-08.org.example:env from env NVSTRIPE_HOST_NQN"; got != want {
		t.Errorf("with NVSTRIPE_HOST_NQN: host_nqn = %q, want %q", got, want)
	}
}

// TestNodeHostNQNSource: nvme-cli's file wins over nvstripe's store, as in
// identity.Load; a bad file is named, not hidden.
func TestNodeHostNQNSource(t *testing.T) {
	nvme, store := t.TempDir(), t.TempDir()
	write := func(dir, s string) {
		if err := os.WriteFile(filepath.Join(dir, "hostnqn"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(store, "nqn.2014-08.org.example:store\n")
	d := identity.Dirs{NVMe: nvme, Store: store}
	if nqn, src := nodeHostNQNSource(d); nqn != "nqn.2014-08.org.example:store" || src != "file "+filepath.Join(store, "hostnqn") {
		t.Errorf("store only: %q from %q", nqn, src)
	}
	write(nvme, "nqn.2014-08.org.example:nvme\n")
	if nqn, src := nodeHostNQNSource(d); nqn != "nqn.2014-08.org.example:nvme" || src != "file "+filepath.Join(nvme, "hostnqn") {
		t.Errorf("nvme-cli's file: %q from %q", nqn, src)
	}
	write(nvme, "not an nqn")
	if nqn, src := nodeHostNQNSource(d); nqn != "" || !strings.Contains(src, "unusable") || !strings.Contains(src, nvme) {
		t.Errorf("a bad file: %q from %q", nqn, src)
	}
}
