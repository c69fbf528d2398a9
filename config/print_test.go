package config

import (
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
