package meta

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
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

// PutTaskIf writes t only if its record's mod revision is still rev, as
// TaskRev returned it (0: only if there is none). It fails with
// ErrConflict when the record changed meanwhile: whoever decided to write
// from the record at rev reads it again.
func (s *Store) PutTaskIf(ctx context.Context, t *TaskRecord, rev int64) error {
	key := s.keys.task(t.ID)
	op, err := putOp(key, t)
	if err != nil {
		return err
	}
	resp, err := s.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(op).Commit()
	if err != nil {
		return s.wrap("write task "+t.ID, err)
	}
	if !resp.Succeeded {
		return classErrorf(ErrConflict, "task %s changed since revision %d", t.ID, rev)
	}
	return nil
}

// TaskRev reads one task like Task and also returns its record's mod
// revision, for PutTaskIf.
func (s *Store) TaskRev(ctx context.Context, id string) (*TaskRecord, int64, error) {
	t := &TaskRecord{}
	rev, err := s.get(ctx, s.keys.task(id), t)
	if errors.Is(err, ErrNotFound) {
		return nil, 0, classErrorf(ErrNotFound, "task %q not found", id)
	}
	if err != nil {
		return nil, 0, err
	}
	return t, rev, nil
}

// StartScrub asks the read-write owner of volume to scrub it: it records a
// scrub task (TaskScrub) addressed to the owner, which carries it out
// (volclient's ServeTasks). A scrub already running there is returned as
// it is; one addressed to a holder that no longer maps the volume is
// replaced. It fails with ErrInvalid when the volume has no read-write
// owner but a mover (Mapper): the scrub runs where the volume is mapped.
// When the task record changes between its read and the start (someone
// else started or ended a scrub of the volume) it reads it again.
func (s *Store) StartScrub(ctx context.Context, volume string) (*TaskRecord, error) {
	holder, err := s.scrubHolder(ctx, volume)
	if err != nil {
		return nil, err
	}
	for range maxRetries {
		t, rev, err := s.TaskRev(ctx, ScrubTaskID(volume))
		if err == nil && t.State == TaskRunning && t.Holder == holder {
			return t, nil
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if t, err = s.putScrub(ctx, volume, holder, rev); !errors.Is(err, ErrConflict) {
			return t, err
		}
	}
	return nil, fmt.Errorf("start scrub of %s: %w", volume, ErrConflict)
}

// StartScrubIf starts a scrub of volume like StartScrub, but only if the
// volume's scrub task record is still the one read at mod revision rev
// (TaskRev; 0: none): a scheduler that decided from that record that a
// scrub is due starts none when the record changed meanwhile (another
// controller started one, its owner ended one), ErrConflict. Of several
// that decide from the same record, one starts the scrub.
func (s *Store) StartScrubIf(ctx context.Context, volume string, rev int64) (*TaskRecord, error) {
	holder, err := s.scrubHolder(ctx, volume)
	if err != nil {
		return nil, err
	}
	return s.putScrub(ctx, volume, holder, rev)
}

// scrubHolder returns who would run volume's scrub: its read-write owner.
func (s *Store) scrubHolder(ctx context.Context, volume string) (string, error) {
	if _, err := s.Volume(ctx, volume); err != nil {
		return "", err
	}
	holder, err := s.Mapper(ctx, volume)
	if err != nil {
		return "", err
	}
	if holder == "" { // a mover (the controller moving shards) runs no scrub
		return "", fmt.Errorf("volume %s is not mapped read-write: its owner runs the scrub, map it first: %w", volume, ErrInvalid)
	}
	return holder, nil
}

// putScrub records a running scrub of volume at holder if the task record
// is still at rev.
func (s *Store) putScrub(ctx context.Context, volume, holder string, rev int64) (*TaskRecord, error) {
	t := &TaskRecord{ID: ScrubTaskID(volume), Kind: TaskScrub, Volume: volume, Holder: holder, State: TaskRunning}
	if err := s.PutTaskIf(ctx, t, rev); err != nil {
		return nil, err
	}
	return t, nil
}
