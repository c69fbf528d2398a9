package moves

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
)

func TestLog(t *testing.T) {
	var b bytes.Buffer
	log := Log(slog.New(slog.NewJSONHandler(&b, nil)))
	task := Task{Segment: decide.SegmentID{Volume: "v", Index: 3}, Shard: 2, Kind: decide.MoveRebuild, From: "a", To: "b", Done: 1 << 20, Total: 1 << 20}
	log(Event{Task: task})
	log(Event{Task: task, Ended: true, Took: 2 * time.Second})
	log(Event{Task: task, Ended: true, Took: time.Second, Err: errors.New("gone")})
	rs := testutil.JSONRecords(t, b.String())
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

func TestTaskEnd(t *testing.T) {
	gone := errors.New("gone")
	for _, tc := range []struct {
		err         error
		state, text string
	}{{nil, meta.TaskDone, ""}, {gone, meta.TaskFailed, "gone"}} {
		task := Task{Segment: decide.SegmentID{Volume: "v", Index: 3}, Shard: 2, State: meta.TaskRunning}
		e := task.End(time.Second, tc.err)
		if task.State != tc.state || task.Err != tc.text {
			t.Errorf("End(%v): state %q err %q, want %q %q", tc.err, task.State, task.Err, tc.state, tc.text)
		}
		if !e.Ended || e.Took != time.Second || e.Err != tc.err || e.Task != task {
			t.Errorf("End(%v) = %+v, want the ended event of %+v", tc.err, e, task)
		}
	}
}
