package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nvstripe.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func byKey(vs []Value) map[string]Value {
	m := map[string]Value{}
	for _, v := range vs {
		m[v.Key] = v
	}
	return m
}

// TestResolvePrecedence checks flag > environment > file > default, key by
// key, with the source named.
func TestResolvePrecedence(t *testing.T) {
	p := writeFile(t, "etcd:\n  endpoints: [f1:2379, f2:2379]\n  cacert: /file/ca.pem\ncluster: filecluster\nhost_nqn: nqn.file\n")
	f, err := ReadFile(p, true)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NVSTRIPE_ETCD": "e1:2379", "NVSTRIPE_CLUSTER": "envcluster", "NVSTRIPE_ETCD_KEY": ""}
	got := byKey(Resolve(Layers{
		Flags:    map[string]string{"cluster": "flagcluster"},
		Env:      func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		File:     f,
		FilePath: p,
	}))
	want := map[string]Value{
		"etcd.endpoints": {Value: "e1:2379", Source: "env NVSTRIPE_ETCD"},
		"etcd.cacert":    {Value: "/file/ca.pem", Source: "file " + p},
		"etcd.cert":      {Value: "", Source: "default"},
		"etcd.key":       {Value: "", Source: "default"}, // empty variable: unset
		"cluster":        {Value: "flagcluster", Source: "flag --cluster"},
		"host_nqn":       {Value: "nqn.file", Source: "file " + p},
	}
	for k, w := range want {
		if g := got[k]; g.Value != w.Value || g.Source != w.Source {
			t.Errorf("%s = %q from %q, want %q from %q", k, g.Value, g.Source, w.Value, w.Source)
		}
	}
	if d := byKey(Resolve(Layers{}))["etcd.endpoints"]; d.Value != "127.0.0.1:2379" || d.Source != "default" {
		t.Errorf("default endpoints = %+v", d)
	}
	if e := byKey(Resolve(Layers{File: f, FilePath: p}))["etcd.endpoints"]; e.Value != "f1:2379,f2:2379" {
		t.Errorf("file endpoints = %+v", e)
	}
}

func TestReadFileErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.yaml")
	if f, err := ReadFile(missing, false); f != nil || err != nil {
		t.Errorf("missing optional file: %v, %v", f, err)
	}
	if _, err := ReadFile(missing, true); err == nil {
		t.Error("missing required file: no error")
	}
	for _, body := range []string{"etcd:\n  endpoint: [a]\n", "clustre: x\n", "etcd: [1, 2]\n", ":\n\t- x"} {
		if _, err := ReadFile(writeFile(t, body), false); err == nil || !strings.Contains(err.Error(), "config file") {
			t.Errorf("%q: err %v, want a config file error", body, err)
		}
	}
}

func TestTLSFiles(t *testing.T) {
	if c, err := (TLSFiles{}).TLS(); c != nil || err != nil {
		t.Errorf("no files: %v, %v", c, err)
	}
	if _, err := (TLSFiles{Cert: "a"}).TLS(); err != ErrTLSPair {
		t.Errorf("cert without key: %v", err)
	}
	if _, err := (TLSFiles{CACert: writeFile(t, "not pem")}).TLS(); err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Errorf("bad CA: %v", err)
	}
	if c, err := (TLSFiles{InsecureSkipVerify: true}).TLS(); err != nil || c == nil || !c.InsecureSkipVerify {
		t.Errorf("insecure: %v, %v", c, err)
	}
}

func TestLoad(t *testing.T) {
	p := writeFile(t, "cluster: c1\n")
	env := map[string]string{PathEnv: p}
	get := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	vs, file, err := Load("", nil, get)
	if err != nil || file != p || byKey(vs)["cluster"].Value != "c1" {
		t.Fatalf("Load via %s: %v %q %v", PathEnv, vs, file, err)
	}
	if _, _, err := Load(p+".missing", nil, get); err == nil {
		t.Error("a named file that is missing: no error")
	}
	env[PathEnv] = p + ".missing"
	if _, _, err := Load("", nil, get); err == nil {
		t.Errorf("a file %s names that is missing: no error", PathEnv)
	}
}

// TestWithDefault: a machine default replaces only a setting left at its
// built-in default, in a copy.
func TestWithDefault(t *testing.T) {
	vs := Resolve(Layers{Flags: map[string]string{"cluster": "c1"}})
	got := WithDefault(vs, "host_nqn", "nqn.x", "file /etc/nvme/hostnqn")
	if v := got[slices.IndexFunc(got, func(v Value) bool { return v.Key == "host_nqn" })]; v.Value != "nqn.x" || v.Source != "file /etc/nvme/hostnqn" {
		t.Errorf("host_nqn = %+v, want nqn.x from file /etc/nvme/hostnqn", v)
	}
	if SourceOf(vs, "host_nqn") != "default" {
		t.Error("WithDefault changed its argument")
	}
	if got := WithDefault(vs, "cluster", "other", "machine"); SourceOf(got, "cluster") != "flag --cluster" {
		t.Errorf("a flag's setting was replaced: %+v", got)
	}
}
