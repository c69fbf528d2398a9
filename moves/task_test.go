package moves

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/meta"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestTaskRoundTrip(t *testing.T) {
	in := Task{Segment: decide.SegmentID{Volume: "vol-1", Index: 42}, Shard: 3, Kind: decide.MoveDrain, From: "h1-n1", To: "h2-n1",
		Started: time.UnixMilli(1_700_000_000_123), Holder: "node1", Done: 10, Total: 20, State: meta.TaskRunning}
	r := in.Record()
	if r.ID != "mv-vol-1-42" || r.Kind != meta.TaskMove || r.Move.From != "h1-n1" || r.Move.Kind != "drain" {
		t.Fatalf("record %+v (move %+v)", r, r.Move)
	}
	out, ok, err := ParseTask(r)
	if !ok || err != nil || out != in {
		t.Fatalf("round trip: %+v %v %v, want %+v", out, ok, err, in)
	}
	long := decide.SegmentID{Volume: strings.Repeat("v", 63), Index: 1}
	if id := TaskID(long); len(id) > 63 || id == TaskID(decide.SegmentID{Volume: long.Volume, Index: 2}) {
		t.Fatalf("long volume task ID %q", id)
	}
}

// TestParseLegacyTask: a record as older builds wrote it, the parameters
// as words in Kind, reads as the same task as the typed record.
func TestParseLegacyTask(t *testing.T) {
	old := &meta.TaskRecord{ID: "mv-vol-1-42", Kind: "move drain seg=42 shard=3 from=h1-n1 to=h2-n1 start=1700000000123",
		Volume: "vol-1", Holder: "node1", Done: 10, Total: 20, State: meta.TaskRunning}
	want := Task{Segment: decide.SegmentID{Volume: "vol-1", Index: 42}, Shard: 3, Kind: decide.MoveDrain, From: "h1-n1", To: "h2-n1",
		Started: time.UnixMilli(1_700_000_000_123), Holder: "node1", Done: 10, Total: 20, State: meta.TaskRunning}
	if !IsLegacyTask(old) {
		t.Fatal("an old record not recognised as one")
	}
	got, ok, err := ParseTask(old)
	if !ok || err != nil || got != want {
		t.Fatalf("legacy: %+v %v %v, want %+v", got, ok, err, want)
	}
	if IsLegacyTask(want.Record()) {
		t.Fatal("a new record taken for an old one")
	}
}

func TestParseTaskRejectsBadInput(t *testing.T) {
	for _, kind := range []string{"move rebuild seg=x shard=1 start=1", "move nope seg=1 shard=1 start=1",
		"move rebuild seg=1 shard=-1 start=1", "move rebuild seg=1 shard=1", "move rebuild oops", "move"} {
		if _, ok, err := ParseTask(&meta.TaskRecord{ID: "t", Kind: kind}); !ok || !errors.Is(err, decide.ErrInvalid) {
			t.Errorf("%q: ok %v err %v, want ErrInvalid", kind, ok, err)
		}
	}
	bad := &meta.TaskRecord{ID: "t", Kind: meta.TaskMove, Move: meta.ShardMove{Kind: "nope"}}
	if _, ok, err := ParseTask(bad); !ok || !errors.Is(err, decide.ErrInvalid) {
		t.Errorf("typed record of unknown move kind: ok %v err %v, want ErrInvalid", ok, err)
	}
	for _, r := range []*meta.TaskRecord{{ID: "t", Kind: "rebalance threshold=0.1"}, {ID: "t", Kind: meta.TaskRebalance, Threshold: 0.1},
		{ID: "t", Kind: meta.TaskScrub}} {
		if _, ok, err := ParseTask(r); ok || err != nil {
			t.Errorf("%+v parsed as a move: %v %v", r, ok, err)
		}
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
