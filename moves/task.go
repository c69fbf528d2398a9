package moves

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/meta"
)

// Task is a move task as stored in a meta.TaskRecord of kind meta.TaskMove,
// its parameters in the record's Move (meta.ShardMove).
//
// A move task's ID is TaskID(segment): a segment has at most one move in
// flight, so it has at most one move task. Done and Total count bytes of
// shard data; Holder names who carries the move out (the volume's owner, or
// the controller).
type Task struct {
	Segment  decide.SegmentID
	Shard    int
	Kind     decide.MoveKind
	From, To string
	Started  time.Time
	Holder   string
	// Done and Total are bytes of shard data; State is meta.TaskRunning,
	// TaskDone or TaskFailed; Err says why a failed task failed.
	Done, Total int64
	State       string
	Err         string
}

// Request is one shard move the controller's runner asks its mover to carry
// out (controller.Mover).
type Request struct {
	Volume  string
	Segment int64
	Shard   int
	To      string // destination namespace
	// Pace is called before each stripe with the bytes it will write
	// (volume.MoveOptions.Pace); nil when unpaced.
	Pace func(ctx context.Context, n int64) error
	// Progress receives bytes of shard data done of total. Never nil.
	Progress func(done, total int64)
}

// TaskID returns the task ID of the move of a segment: "mv-VOLUME-INDEX",
// or "mv-" and a hash when that is too long for a meta name.
func TaskID(seg decide.SegmentID) string {
	id := fmt.Sprintf("mv-%s-%d", seg.Volume, seg.Index)
	if len(id) <= 63 {
		return id
	}
	h := sha256.Sum256([]byte(seg.String()))
	return "mv-" + hex.EncodeToString(h[:16])
}

// Record encodes t as a task record.
func (t Task) Record() *meta.TaskRecord {
	mv := meta.ShardMove{Kind: t.Kind.String(), Segment: t.Segment.Index, Shard: t.Shard,
		From: t.From, To: t.To, Started: t.Started.UnixMilli()}
	return &meta.TaskRecord{ID: TaskID(t.Segment), Kind: meta.TaskMove, Move: mv, Volume: t.Segment.Volume,
		Holder: t.Holder, Done: t.Done, Total: t.Total, State: t.State, Error: t.Err}
}

// ParseTask decodes a move task record, in the typed form Record writes or
// in the words older builds wrote in Kind (see meta.TaskRecord); ok is
// false for other tasks. A malformed one fails with decide.ErrInvalid.
func ParseTask(r *meta.TaskRecord) (Task, bool, error) {
	var mv meta.ShardMove
	switch {
	case r.Kind == meta.TaskMove && r.Move != (meta.ShardMove{}):
		mv = r.Move
	case r.Kind == meta.TaskMove:
		return Task{}, true, fmt.Errorf("task %s: move task without its move: %w", r.ID, decide.ErrInvalid)
	case IsLegacyTask(r) && strings.HasPrefix(r.Kind, meta.TaskMove+" "):
		var err error
		if mv, err = legacyMove(r); err != nil {
			return Task{}, true, err
		}
	default:
		return Task{}, false, nil
	}
	t := Task{Segment: decide.SegmentID{Volume: r.Volume, Index: mv.Segment}, Shard: mv.Shard, From: mv.From, To: mv.To,
		Started: time.UnixMilli(mv.Started), Holder: r.Holder, Done: r.Done, Total: r.Total, State: r.State, Err: r.Error}
	kind, err := parseMoveKind(mv.Kind)
	if err != nil {
		return t, true, fmt.Errorf("task %s: %w", r.ID, err)
	}
	if mv.Segment < 0 || mv.Shard < 0 {
		return t, true, fmt.Errorf("task %s: segment %d shard %d: %w", r.ID, mv.Segment, mv.Shard, decide.ErrInvalid)
	}
	t.Kind = kind
	return t, true, nil
}

// IsLegacyTask reports whether r is in the form older builds wrote: its
// parameters as words in Kind ("move KIND seg=...", "rebalance
// threshold=..."), which ParseTask and controller.ParseTask still read.
func IsLegacyTask(r *meta.TaskRecord) bool {
	return r.Move == (meta.ShardMove{}) && r.Threshold == 0 && strings.Contains(r.Kind, " ") &&
		(strings.HasPrefix(r.Kind, meta.TaskMove+" ") || strings.HasPrefix(r.Kind, meta.TaskRebalance+" "))
}

// legacyMove reads the words of an older build's move task:
//
//	move KIND seg=INDEX shard=N from=NS to=NS start=UNIXMILLI
func legacyMove(r *meta.TaskRecord) (meta.ShardMove, error) {
	w := strings.Fields(r.Kind)
	if len(w) < 2 {
		return meta.ShardMove{}, fmt.Errorf("task %s: %q: %w", r.ID, r.Kind, decide.ErrInvalid)
	}
	kv, err := LegacyWords(r.ID, w[2:])
	if err != nil {
		return meta.ShardMove{}, err
	}
	idx, err1 := strconv.ParseInt(kv["seg"], 10, 64)
	shard, err2 := strconv.Atoi(kv["shard"])
	start, err3 := strconv.ParseInt(kv["start"], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return meta.ShardMove{}, fmt.Errorf("task %s: %q: %w", r.ID, r.Kind, decide.ErrInvalid)
	}
	return meta.ShardMove{Kind: w[1], Segment: idx, Shard: shard, From: kv["from"], To: kv["to"], Started: start}, nil
}

// LegacyWords reads the KEY=VALUE words of an older build's task Kind.
func LegacyWords(id string, words []string) (map[string]string, error) {
	kv := map[string]string{}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			return nil, fmt.Errorf("task %s: word %q: %w", id, w, decide.ErrInvalid)
		}
		kv[k] = v
	}
	return kv, nil
}

func parseMoveKind(s string) (decide.MoveKind, error) {
	for _, k := range []decide.MoveKind{decide.MoveRebuild, decide.MoveDrain, decide.MoveRebalance} {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("move kind %q: %w", s, decide.ErrInvalid)
}

// ETA estimates when a task that started at start and has done of total
// bytes will finish, at now; ok is false until some progress was made.
func ETA(start, now time.Time, done, total int64) (time.Duration, bool) {
	el := now.Sub(start)
	if done <= 0 || total <= 0 || el <= 0 {
		return 0, false
	}
	if done >= total {
		return 0, true
	}
	eta := el.Seconds() * float64(total-done) / float64(done)
	if eta > float64(math.MaxInt64/int64(time.Second)) {
		return 0, false
	}
	return time.Duration(eta * float64(time.Second)), true
}
