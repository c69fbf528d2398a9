package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func warnRecords(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func TestWarnEvery(t *testing.T) {
	var b bytes.Buffer
	now := time.Unix(1000, 0)
	warn := warnEvery(slog.New(slog.NewJSONHandler(&b, nil)), time.Minute, "volume runs degraded", func() time.Time { return now })
	warn("v", "volume", "v")
	warn("v", "volume", "v") // suppressed
	warn("w", "volume", "w")
	now = now.Add(30 * time.Second)
	warn("v", "volume", "v") // suppressed
	now = now.Add(31 * time.Second)
	warn("v", "volume", "v")
	rs := warnRecords(t, &b)
	if len(rs) != 3 {
		t.Fatalf("%d warnings, want 3:\n%s", len(rs), b.String())
	}
	if rs[0]["volume"] != "v" || rs[1]["volume"] != "w" || rs[2]["volume"] != "v" || rs[2]["suppressed"] != float64(2) || rs[0]["level"] != "WARN" {
		t.Errorf("warnings %v", rs)
	}
}
