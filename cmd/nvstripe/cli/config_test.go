package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/meta/metatest"
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
