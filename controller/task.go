package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
)

// RebalanceRecord returns the record of a rebalance task (`admin rebalance
// --apply`).
func RebalanceRecord(id string, threshold float64) *meta.TaskRecord {
	return &meta.TaskRecord{ID: id, Kind: meta.TaskRebalance, Threshold: threshold, State: meta.TaskRunning}
}

// ParseTask decodes an operator task (rebalance), in the typed form
// RebalanceRecord writes or in the words older builds wrote in Kind
// ("rebalance threshold=FRACTION"); ok is false for other tasks.
func ParseTask(r *meta.TaskRecord) (decide.Task, bool, error) {
	th := r.Threshold
	switch {
	case r.Kind == meta.TaskRebalance:
	case moves.IsLegacyTask(r) && strings.HasPrefix(r.Kind, meta.TaskRebalance+" "):
		kv, err := moves.LegacyWords(r.ID, strings.Fields(r.Kind)[1:])
		if err != nil {
			return decide.Task{}, true, err
		}
		if th, err = strconv.ParseFloat(kv["threshold"], 64); err != nil {
			return decide.Task{}, true, fmt.Errorf("task %s: threshold %q: %w", r.ID, kv["threshold"], decide.ErrInvalid)
		}
	default:
		return decide.Task{}, false, nil
	}
	if !(th > 0 && th < 1) {
		return decide.Task{}, true, fmt.Errorf("task %s: threshold %g: %w", r.ID, th, decide.ErrInvalid)
	}
	return decide.Task{ID: r.ID, Kind: decide.TaskRebalance, Threshold: th}, true, nil
}

// migrateTries is how many times MigrateTasks reads a task again whose
// record changed between its read and its rewrite.
const migrateTries = 3

// MigrateTasks rewrites the task records older builds wrote, with a move's
// or a rebalance's parameters as words in Kind, in the typed form (a move
// task's meta.ShardMove, a rebalance task's Threshold). Each is rewritten in
// a transaction that checks the record is still the one read
// (meta.Store.PutTaskIf): one its owner rewrote meanwhile (progress, in the
// typed form since it runs this build) is read again, and left alone once
// typed. Records that do not parse are left as they are (they are skipped
// as before). The runner calls it when it starts leading; it returns how
// many records it rewrote.
func MigrateTasks(ctx context.Context, store *meta.Store) (int, error) {
	ts, err := store.Tasks(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, t := range ts {
		if !moves.IsLegacyTask(t) {
			continue
		}
		done, err := migrateTask(ctx, store, t.ID)
		if done {
			n++
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// migrateTask rewrites task id in the typed form if it is still legacy.
func migrateTask(ctx context.Context, store *meta.Store, id string) (bool, error) {
	for range migrateTries {
		old, rev, err := store.TaskRev(ctx, id)
		if errors.Is(err, meta.ErrNotFound) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		rec := typedTask(old)
		if rec == nil {
			return false, nil
		}
		err = store.PutTaskIf(ctx, rec, rev)
		if !errors.Is(err, meta.ErrConflict) {
			return err == nil, err
		}
	}
	return false, fmt.Errorf("migrate task %s: %w", id, meta.ErrConflict)
}

// typedTask returns old, a legacy task record, in the typed form; nil when
// it is not legacy or does not parse.
func typedTask(old *meta.TaskRecord) *meta.TaskRecord {
	if !moves.IsLegacyTask(old) {
		return nil
	}
	if mt, ok, err := moves.ParseTask(old); ok {
		if err != nil {
			return nil
		}
		rec := mt.Record()
		rec.ID = old.ID
		return rec
	}
	rt, ok, err := ParseTask(old)
	if !ok || err != nil {
		return nil
	}
	rec := *old
	rec.Kind, rec.Threshold = meta.TaskRebalance, rt.Threshold
	return &rec
}
