package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func records(t *testing.T, b *bytes.Buffer) []map[string]any {
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

func TestLogMoves(t *testing.T) {
	var b bytes.Buffer
	log := LogMoves(slog.New(slog.NewJSONHandler(&b, nil)))
	task := MoveTask{Segment: SegmentID{Volume: "v", Index: 3}, Shard: 2, Kind: MoveRebuild, From: "a", To: "b", Done: 1 << 20, Total: 1 << 20}
	log(MoveEvent{Task: task})
	log(MoveEvent{Task: task, Ended: true, Took: 2 * time.Second})
	log(MoveEvent{Task: task, Ended: true, Took: time.Second, Err: errors.New("gone")})
	rs := records(t, &b)
	if len(rs) != 3 {
		t.Fatalf("%d records:\n%s", len(rs), b.String())
	}
	want := []struct{ msg, level string }{{"move started", "INFO"}, {"move ended", "INFO"}, {"move failed", "WARN"}}
	for i, w := range want {
		r := rs[i]
		if r["msg"] != w.msg || r["level"] != w.level || r["volume"] != "v" || r["segment"] != float64(3) || r["kind"] != "rebuild" {
			t.Errorf("record %d = %v, want %s at %s", i, r, w.msg, w.level)
		}
	}
	if rs[1]["bytes"] != float64(1<<20) || rs[1]["duration"] != float64(2*time.Second) || rs[2]["err"] != "gone" {
		t.Errorf("end records %v / %v", rs[1], rs[2])
	}
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
	rs := records(t, &b)
	if len(rs) != 3 {
		t.Fatalf("%d warnings, want 3:\n%s", len(rs), b.String())
	}
	if rs[0]["volume"] != "v" || rs[1]["volume"] != "w" || rs[2]["volume"] != "v" || rs[2]["suppressed"] != float64(2) || rs[0]["level"] != "WARN" {
		t.Errorf("warnings %v", rs)
	}
}
