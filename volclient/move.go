package volclient

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/placement"
)

// MoveProgress reports one shard move.
type MoveProgress struct {
	Segment     int64
	Shard       int
	From, To    meta.SlotRef
	Done, Total int64 // stripes
	Finished    bool
	Err         error
}

// MoveShard moves shard idx of segment seg to a slot on namespace to (""
// lets placement choose, keeping the failure-domain rule). The sequence is
// crash-safe: the move is recorded in etcd (BeginMove) before any data moves,
// committed only when the new slot is complete and flushed (CommitMove),
// and the old slot is released last (FinishMove). ResumeMoves cleans up
// after a crash at any step. MoveShardPaced is the same with pacing.
func (m *Mapped) MoveShard(ctx context.Context, seg int64, idx int, to string, progress func(MoveProgress)) error {
	return m.MoveShardPaced(ctx, seg, idx, to, nil, progress)
}

// ResumeMoves settles moves a crash left in etcd: a committed move is
// finished (its new slot is complete), an uncommitted one is rolled back
// (its destination was never trusted). A committed move whose old slot
// readers may still read is left as it is (meta.ErrReadersBehind): the
// controller finishes it once they follow. It returns how many it settled.
func (m *Mapped) ResumeMoves(ctx context.Context) (int, error) {
	segs, _, err := m.Map.Segments(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for id, rec := range segs {
		if rec.Move == nil {
			continue
		}
		if rec.Move.Committed() {
			err = m.Map.FinishMove(ctx, id)
		} else {
			err = m.Map.AbortMove(ctx, id)
		}
		if errors.Is(err, meta.ErrReadersBehind) {
			continue // its old slot is released once the readers follow
		}
		if err != nil {
			return n, fmt.Errorf("segment %d: settling an interrupted move: %w", id, err)
		}
		n++
	}
	return n, nil
}

// LostShards lists, in order, the (segment, shard) pairs of the volume that sit
// on namespaces in state out or failed.
func (m *Mapped) LostShards(ctx context.Context, store *meta.Store) ([][2]int64, error) {
	nss, err := store.Namespaces(ctx)
	if err != nil {
		return nil, err
	}
	lost := map[string]bool{}
	for _, ns := range nss {
		if ns.State == placement.StateOut.String() || ns.State == placement.StateFailed.String() {
			lost[ns.ID] = true
		}
	}
	segs, _, err := m.Map.Segments(ctx)
	if err != nil {
		return nil, err
	}
	var out [][2]int64
	for id, rec := range segs {
		for i, s := range rec.Slots {
			if lost[s.NS] {
				out = append(out, [2]int64{id, int64(i)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] || out[i][0] == out[j][0] && out[i][1] < out[j][1] })
	return out, nil
}

// Rebuild moves every lost shard (see LostShards) to a new slot, parallel
// moves at a time (segments differ, so reads spread over many namespaces).
// It returns the number of shards rebuilt.
func (m *Mapped) Rebuild(ctx context.Context, store *meta.Store, parallel int, progress func(MoveProgress)) (int, error) {
	lost, err := m.LostShards(ctx, store)
	if err != nil {
		return 0, err
	}
	parallel = max(parallel, 1)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	var progMu sync.Mutex
	report := func(p MoveProgress) {
		progMu.Lock()
		defer progMu.Unlock()
		if progress != nil {
			progress(p)
		}
	}
	for _, l := range lost {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := m.MoveShard(ctx, l[0], int(l[1]), "", report); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return len(lost) - len(errs), errors.Join(errs...)
}
