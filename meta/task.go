package meta

import (
	"context"
	"errors"
	"fmt"
)

// PutTask creates or replaces a task's progress record.
func (s *Store) PutTask(ctx context.Context, t *TaskRecord) error {
	op, err := putOp(s.keys.task(t.ID), t)
	if err != nil {
		return err
	}
	_, err = s.kv.Do(ctx, op)
	return s.wrap("write task "+t.ID, err)
}

// Task reads one task.
func (s *Store) Task(ctx context.Context, id string) (*TaskRecord, error) {
	t := &TaskRecord{}
	if _, err := s.get(ctx, s.keys.task(id), t); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, classErrorf(ErrNotFound, "task %q not found", id)
		}
		return nil, err
	}
	return t, nil
}

// Tasks lists the tasks in id order.
func (s *Store) Tasks(ctx context.Context) ([]*TaskRecord, error) {
	ts, _, err := list(ctx, s, s.keys.tasks(), func() *TaskRecord { return &TaskRecord{} })
	return ts, err
}

// DeleteTask removes a task record.
func (s *Store) DeleteTask(ctx context.Context, id string) error {
	_, err := s.kv.Delete(ctx, s.keys.task(id))
	return s.wrap("delete task "+id, err)
}

// StartScrub asks the read-write owner of volume to scrub it: it records a
// scrub task (TaskScrub) addressed to the owner, which carries it out
// (volclient's ServeTasks). A scrub already running there is returned as
// it is; one addressed to a holder that no longer maps the volume is
// replaced. It fails with ErrInvalid when the volume has no read-write
// owner but a mover (Mapper): the scrub runs where the volume is mapped.
func (s *Store) StartScrub(ctx context.Context, volume string) (*TaskRecord, error) {
	if _, err := s.Volume(ctx, volume); err != nil {
		return nil, err
	}
	holder, err := s.Mapper(ctx, volume)
	if err != nil {
		return nil, err
	}
	if holder == "" { // a mover (the controller moving shards) runs no scrub
		return nil, fmt.Errorf("volume %s is not mapped read-write: its owner runs the scrub, map it first: %w", volume, ErrInvalid)
	}
	t, err := s.Task(ctx, ScrubTaskID(volume))
	if err == nil && t.State == TaskRunning && t.Holder == holder {
		return t, nil
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	t = &TaskRecord{ID: ScrubTaskID(volume), Kind: TaskScrub, Volume: volume, Holder: holder, State: TaskRunning}
	if err := s.PutTask(ctx, t); err != nil {
		return nil, err
	}
	return t, nil
}
