package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nvstripe/nvstripe/meta"
)

// MoveTask is a move task as stored in a meta.TaskRecord.
//
// meta.TaskRecord has a free-form Kind and no fields for a move's
// parameters, so they are encoded in Kind as space-separated words:
//
//	move KIND seg=INDEX shard=N from=NS to=NS start=UNIXMILLI
//	rebalance threshold=FRACTION          (a rebalance request, see ParseTask)
//
// KIND is rebuild, drain or rebalance (MoveKind.String). A move task's ID is
// MoveTaskID(segment): a segment has at most one move in flight, so it has at
// most one move task. Done and Total count bytes of shard data; Holder names
// who carries the move out (the volume's owner, or the controller).
type MoveTask struct {
	Segment  SegmentID
	Shard    int
	Kind     MoveKind
	From, To string
	Started  time.Time
	Holder   string
	// Done and Total are bytes of shard data; State is meta.TaskRunning,
	// TaskDone or TaskFailed; Err says why a failed task failed.
	Done, Total int64
	State       string
	Err         string
}

// MoveTaskID returns the task ID of the move of a segment: "mv-VOLUME-INDEX",
// or "mv-" and a hash when that is too long for a meta name.
func MoveTaskID(seg SegmentID) string {
	id := fmt.Sprintf("mv-%s-%d", seg.Volume, seg.Index)
	if len(id) <= 63 {
		return id
	}
	h := sha256.Sum256([]byte(seg.String()))
	return "mv-" + hex.EncodeToString(h[:16])
}

// Record encodes t as a task record.
func (t MoveTask) Record() *meta.TaskRecord {
	kind := fmt.Sprintf("move %s seg=%d shard=%d from=%s to=%s start=%d",
		t.Kind, t.Segment.Index, t.Shard, t.From, t.To, t.Started.UnixMilli())
	return &meta.TaskRecord{ID: MoveTaskID(t.Segment), Kind: kind, Volume: t.Segment.Volume,
		Holder: t.Holder, Done: t.Done, Total: t.Total, State: t.State, Error: t.Err}
}

// ParseMoveTask decodes a move task record; ok is false for other tasks.
func ParseMoveTask(r *meta.TaskRecord) (MoveTask, bool, error) {
	w := strings.Fields(r.Kind)
	if len(w) == 0 || w[0] != "move" {
		return MoveTask{}, false, nil
	}
	if len(w) < 2 {
		return MoveTask{}, true, fmt.Errorf("task %s: %q: %w", r.ID, r.Kind, ErrInvalid)
	}
	kv, err := taskWords(r.ID, w[2:])
	if err != nil {
		return MoveTask{}, true, err
	}
	t := MoveTask{Segment: SegmentID{Volume: r.Volume}, From: kv["from"], To: kv["to"],
		Holder: r.Holder, Done: r.Done, Total: r.Total, State: r.State, Err: r.Error}
	if t.Kind, err = parseMoveKind(w[1]); err != nil {
		return t, true, fmt.Errorf("task %s: %w", r.ID, err)
	}
	idx, err1 := strconv.ParseInt(kv["seg"], 10, 64)
	shard, err2 := strconv.Atoi(kv["shard"])
	start, err3 := strconv.ParseInt(kv["start"], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || idx < 0 || shard < 0 {
		return t, true, fmt.Errorf("task %s: %q: %w", r.ID, r.Kind, ErrInvalid)
	}
	t.Segment.Index, t.Shard, t.Started = idx, shard, time.UnixMilli(start)
	return t, true, nil
}

// RebalanceRecord returns the record of a rebalance task (`admin rebalance
// --apply`).
func RebalanceRecord(id string, threshold float64) *meta.TaskRecord {
	return &meta.TaskRecord{ID: id, Kind: "rebalance threshold=" + strconv.FormatFloat(threshold, 'g', -1, 64),
		State: meta.TaskRunning}
}

// ParseTask decodes an operator task (rebalance); ok is false for other
// tasks.
func ParseTask(r *meta.TaskRecord) (Task, bool, error) {
	w := strings.Fields(r.Kind)
	if len(w) == 0 || w[0] != "rebalance" {
		return Task{}, false, nil
	}
	kv, err := taskWords(r.ID, w[1:])
	if err != nil {
		return Task{}, true, err
	}
	th, err := strconv.ParseFloat(kv["threshold"], 64)
	if err != nil || th <= 0 || th >= 1 {
		return Task{}, true, fmt.Errorf("task %s: threshold %q: %w", r.ID, kv["threshold"], ErrInvalid)
	}
	return Task{ID: r.ID, Kind: TaskRebalance, Threshold: th}, true, nil
}

func taskWords(id string, words []string) (map[string]string, error) {
	kv := map[string]string{}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			return nil, fmt.Errorf("task %s: word %q: %w", id, w, ErrInvalid)
		}
		kv[k] = v
	}
	return kv, nil
}

func parseMoveKind(s string) (MoveKind, error) {
	for _, k := range []MoveKind{MoveRebuild, MoveDrain, MoveRebalance} {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("move kind %q: %w", s, ErrInvalid)
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
