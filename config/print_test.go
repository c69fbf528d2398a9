package config

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteSettings(t *testing.T) {
	var b strings.Builder
	if err := WriteSettings(&b, []Value{{Key: "etcd.endpoints", Value: "10.0.0.1:2379", Source: "flag --etcd"}, {Key: "etcd.cacert", Source: "default"}}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "KEY") || !strings.Contains(lines[1], "10.0.0.1:2379") ||
		!strings.Contains(lines[1], "flag --etcd") || strings.Fields(lines[2])[1] != "-" {
		t.Fatalf("settings table:\n%s", b.String())
	}
}

func TestSourceOf(t *testing.T) {
	vs := []Value{{Key: "etcd.endpoints", Source: "default"}, {Key: "cluster", Source: "env NVSTRIPE_CLUSTER"}}
	if got := SourceOf(vs, "cluster"); got != "env NVSTRIPE_CLUSTER" {
		t.Fatalf("SourceOf cluster = %q", got)
	}
	if got := SourceOf(vs, "nope"); got != "" {
		t.Fatalf("SourceOf of a missing key = %q, want empty", got)
	}
}

// mapFlags are flags in a map: given ones, and the defaults Apply set.
type mapFlags struct{ given, set map[string]string }

func (m mapFlags) Given(f string) (string, bool) { v, ok := m.given[f]; return v, ok }

func (m mapFlags) Default(f, v string) error {
	if _, ok := m.given[f]; !ok && f != "host-nqn" { // the command has no --host-nqn
		m.set[f] = v
	}
	return nil
}

// TestApply: a given flag wins over the environment, which wins over the
// default; flags not given get the resolved value.
func TestApply(t *testing.T) {
	fl := mapFlags{given: map[string]string{"etcd": "10.0.0.1:2379"}, set: map[string]string{}}
	env := map[string]string{"NVSTRIPE_ETCD": "10.9.9.9:2379", "NVSTRIPE_CLUSTER": "prod"}
	vs, file, err := Apply(filepath.Join(t.TempDir(), "none.yaml"), fl, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil {
		t.Fatalf("a named config file that is missing: %v %q, want an error", vs, file)
	}
	vs, _, err = Apply("", fl, func(k string) (string, bool) {
		if k == PathEnv {
			return "", false
		}
		v, ok := env[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	if SourceOf(vs, "etcd.endpoints") != "flag --etcd" || fl.set["etcd"] != "" {
		t.Errorf("etcd: source %q, set %q: want the flag, untouched", SourceOf(vs, "etcd.endpoints"), fl.set["etcd"])
	}
	if fl.set["cluster"] != "prod" || fl.set["host-nqn"] != "" {
		t.Errorf("defaults set: %v, want cluster=prod from the environment and no host-nqn", fl.set)
	}
}
