package meta

import (
	"errors"
	"strings"
	"testing"
)

// TestTaskRecordForms: a move task's parameters are typed fields of the
// record (nested under "move"), other tasks have none; a record as older
// builds wrote it (the parameters as words in kind) still decodes, and
// move parameters on another kind of task, or negative ones, are refused.
func TestTaskRecordForms(t *testing.T) {
	mv := &TaskRecord{ID: "mv-v-3", Kind: TaskMove, Volume: "v", Holder: "node1", State: TaskRunning,
		Move: ShardMove{Kind: "drain", Segment: 3, Shard: 1, From: "a", To: "b", Started: 1_790_000_000_123}}
	b, err := encode(mv)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"move":{"kind":"drain","segment":3,"shard":1,"from":"a","to":"b","started":1790000000123}`) {
		t.Fatalf("typed move record %s", b)
	}
	var back TaskRecord
	if err := decode("task/mv-v-3", b, &back); err != nil || back != *mv {
		t.Fatalf("decoded %+v, %v; want %+v", back, err, *mv)
	}
	rb, err := encode(&TaskRecord{ID: "rb", Kind: TaskRebalance, Threshold: 0.05, State: TaskRunning})
	if err != nil || strings.Contains(string(rb), `"move"`) || !strings.Contains(string(rb), `"threshold":0.05`) {
		t.Fatalf("rebalance record %s, %v", rb, err)
	}
	old := `{"v":1,"id":"mv-v-3","kind":"move drain seg=3 shard=1 from=a to=b start=1790000000123","volume":"v","holder":"node1","done":0,"total":0,"state":"running"}`
	var legacy TaskRecord
	if err := decode("task/mv-v-3", []byte(old), &legacy); err != nil || legacy.Move != (ShardMove{}) || legacy.Kind != "move drain seg=3 shard=1 from=a to=b start=1790000000123" {
		t.Fatalf("an older build's record: %+v, %v", legacy, err)
	}
	for name, r := range map[string]*TaskRecord{
		"move on a scrub":      {ID: "s", Kind: TaskScrub, State: TaskRunning, Move: ShardMove{Kind: "drain"}},
		"negative segment":     {ID: "m", Kind: TaskMove, State: TaskRunning, Move: ShardMove{Kind: "drain", Segment: -1}},
		"negative shard":       {ID: "m", Kind: TaskMove, State: TaskRunning, Move: ShardMove{Kind: "drain", Shard: -1}},
		"threshold on a move":  {ID: "m", Kind: TaskMove, State: TaskRunning, Threshold: 0.1},
		"threshold on a scrub": {ID: "s", Kind: TaskScrub, State: TaskRunning, Threshold: 0.1},
	} {
		if _, err := encode(r); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
