package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta"
)

func TestMoveTaskRoundTrip(t *testing.T) {
	in := MoveTask{Segment: SegmentID{Volume: "vol-1", Index: 42}, Shard: 3, Kind: MoveDrain, From: "h1-n1", To: "h2-n1",
		Started: time.UnixMilli(1_700_000_000_123), Holder: "node1", Done: 10, Total: 20, State: meta.TaskRunning}
	r := in.Record()
	if r.ID != "mv-vol-1-42" {
		t.Fatalf("ID %q", r.ID)
	}
	out, ok, err := ParseMoveTask(r)
	if !ok || err != nil || out != in {
		t.Fatalf("round trip: %+v %v %v, want %+v", out, ok, err, in)
	}
	long := SegmentID{Volume: strings.Repeat("v", 63), Index: 1}
	if id := MoveTaskID(long); len(id) > 63 || id == MoveTaskID(SegmentID{Volume: long.Volume, Index: 2}) {
		t.Fatalf("long volume task ID %q", id)
	}
}

func TestParseTasksRejectBadInput(t *testing.T) {
	for _, kind := range []string{"move", "move rebuild seg=x shard=1 start=1", "move nope seg=1 shard=1 start=1",
		"move rebuild seg=1 shard=-1 start=1", "move rebuild seg=1 shard=1", "move rebuild oops"} {
		if _, ok, err := ParseMoveTask(&meta.TaskRecord{ID: "t", Kind: kind}); !ok || !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: ok %v err %v, want ErrInvalid", kind, ok, err)
		}
	}
	if _, ok, err := ParseMoveTask(&meta.TaskRecord{ID: "t", Kind: "rebalance threshold=0.1"}); ok || err != nil {
		t.Errorf("a rebalance task parsed as a move: %v %v", ok, err)
	}
	for _, kind := range []string{"rebalance", "rebalance threshold=2", "rebalance threshold=x", "rebalance 0.1"} {
		if _, ok, err := ParseTask(&meta.TaskRecord{ID: "t", Kind: kind}); !ok || !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: ok %v err %v, want ErrInvalid", kind, ok, err)
		}
	}
	task, ok, err := ParseTask(RebalanceRecord("r1", 0.05))
	if !ok || err != nil || task != (Task{ID: "r1", Kind: TaskRebalance, Threshold: 0.05}) {
		t.Fatalf("rebalance record: %+v %v %v", task, ok, err)
	}
}

func TestETA(t *testing.T) {
	t0 := time.Unix(1000, 0)
	if eta, ok := ETA(t0, t0.Add(10*time.Second), 25, 100); !ok || eta != 30*time.Second {
		t.Fatalf("ETA %v %v, want 30s", eta, ok)
	}
	if _, ok := ETA(t0, t0.Add(time.Second), 0, 100); ok {
		t.Fatal("ETA without progress")
	}
	if _, ok := ETA(time.Time{}, t0, 1, 1<<62); ok {
		t.Fatal("ETA overflowed instead of giving up")
	}
}
