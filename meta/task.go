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
			return nil, fmt.Errorf("task %q: %w", id, ErrNotFound)
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
