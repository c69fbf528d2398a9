package meta

import (
	"strings"
	"testing"
)

func TestHolderName(t *testing.T) {
	long := strings.Repeat("a", 70)
	for _, c := range []struct {
		prefix, host string
		ids          []string
		want         string
	}{
		{"map", "node7", nil, "map.node7"},
		{"map", "gpu-01.rack2.example.com", nil, "map.gpu-01.rack2.example.com"},
		{"map", "(none)", []string{"", "4f2a9c1e0b7d4e6f8a9b0c1d2e3f4a5b\n"}, "map.node-" + nodeIDHex("4f2a9c1e0b7d4e6f8a9b0c1d2e3f4a5b")},
		{"map", "(none)", nil, "map.node"},
		{"map", "", []string{"52:54:00:12:34:56"}, "map.node-" + nodeIDHex("52:54:00:12:34:56")},
		{"map", "localhost", []string{"id"}, "map.node-2e07b55c3ac0"}, // stable: fixed by the id
		{"map", "host with spaces", nil, "map.host-with-spaces"},
		{"map", "_under", nil, "map.under"},
		{"map", "((()))", []string{"x"}, "map.node-" + nodeIDHex("x")},
		{"map", "héllo", nil, "map.h--llo"},
		{"map", long, nil, "map." + long[:59]},
		{"map", "ab" + strings.Repeat("-", 70), nil, "map.ab"},
		{"", "(none)", nil, "node"},
		{"agent", "n1", nil, "agent.n1"},
	} {
		got := HolderName(c.prefix, c.host, c.ids...)
		if got != c.want {
			t.Errorf("HolderName(%q, %q, %q) = %q, want %q", c.prefix, c.host, c.ids, got, c.want)
		}
		if err := checkName("holder", got); err != nil {
			t.Errorf("HolderName(%q, %q) = %q is not a valid name: %v", c.prefix, c.host, got, err)
		}
	}
	if a, b := HolderName("map", "(none)", "id1"), HolderName("map", "(none)", "id2"); a == b {
		t.Errorf("different machine ids give the same name %q", a)
	}
}

func TestDefaultHolderIsValid(t *testing.T) {
	if err := checkName("holder", DefaultHolder("map")); err != nil {
		t.Fatal(err)
	}
}

// nodeIDHex is the 12 hex digits HolderName derives from id.
func nodeIDHex(id string) string { return strings.TrimPrefix(nodeID([]string{id}), "node-") }
