package volclient

import (
	"context"
	"sync"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/volume"
)

// TaskMover is the controller's mover (controller.Mover and
// controller.StaleRepairer; controllerd checks that it is both): it
// moves shards, and rebuilds stale slots, of volumes nobody has mapped by
// opening them itself (OpenVolume: ownership, interrupted moves settled,
// dirty segments resynced). Concurrent moves and repairs of one volume share
// one open; the volume is closed, and its ownership released, when the last
// of them ends. Safe for concurrent use.
type TaskMover struct {
	store *meta.Store
	opts  OpenOptions

	mu   sync.Mutex
	open map[string]*moverVolume
}

type moverVolume struct {
	ready chan struct{} // closed once m or err is set
	m     *Mapped
	err   error
	refs  int
}

// NewTaskMover returns a TaskMover that opens volumes with o (o.Holder must
// be the controller's RunnerConfig.Holder), as a mover (OpenOptions.Mover):
// volumes mapped read-only are moved with their readers attached.
func NewTaskMover(store *meta.Store, o OpenOptions) *TaskMover {
	o.Mover, o.ReadOnly = true, false
	return &TaskMover{store: store, opts: o, open: map[string]*moverVolume{}}
}

// MoveShard implements controller.Mover.
func (t *TaskMover) MoveShard(ctx context.Context, req moves.Request) error {
	m, err := t.acquire(ctx, req.Volume)
	if err != nil {
		return err
	}
	defer t.release(context.WithoutCancel(ctx), req.Volume)
	chunk := m.Record.Layout.Chunk
	return m.MoveShardPaced(ctx, req.Segment, req.Shard, req.To, req.Pace, func(p MoveProgress) {
		req.Progress(p.Done*chunk, p.Total*chunk)
	})
}

// RepairStale implements controller.StaleRepairer: it opens the volume
// (sharing an open one), rebuilds its stale slots whose namespace answers,
// and closes it when nothing else uses it.
func (t *TaskMover) RepairStale(ctx context.Context, name string) (int64, error) {
	m, err := t.acquire(ctx, name)
	if err != nil {
		return 0, err
	}
	defer t.release(context.WithoutCancel(ctx), name)
	return m.Volume.Repair(ctx)
}

// acquire opens the volume, or shares the open one.
func (t *TaskMover) acquire(ctx context.Context, name string) (*Mapped, error) {
	t.mu.Lock()
	v := t.open[name]
	if v == nil {
		v = &moverVolume{ready: make(chan struct{})}
		t.open[name] = v
		t.mu.Unlock()
		v.m, v.err = OpenVolume(context.WithoutCancel(ctx), t.store, name, t.volumeOptions(name))
		close(v.ready)
		t.mu.Lock()
	}
	v.refs++
	t.mu.Unlock()
	<-v.ready
	if v.err != nil {
		t.release(ctx, name)
		return nil, v.err
	}
	return v.m, nil
}

// volumeOptions are the options volume name opens with: the mover's, and
// unless they say otherwise, a line on Logf for each block a move of it
// carries over unsettled, as a mapping's agent logs it (else nothing would
// tell the operator of blocks the controller's rebuilds carried).
func (t *TaskMover) volumeOptions(name string) OpenOptions {
	o := t.opts
	if logf := o.Logf; logf != nil && o.Events.Unsettled == nil {
		o.Events.Unsettled = func(b volume.UnsettledBlock) { logf("%s", b.Message(name)) }
	}
	return o
}

// release drops one reference; the last closes the volume.
func (t *TaskMover) release(ctx context.Context, name string) {
	t.mu.Lock()
	v := t.open[name]
	v.refs--
	last := v.refs == 0
	if last {
		delete(t.open, name)
	}
	t.mu.Unlock()
	if last && v.m != nil {
		_ = v.m.Close(ctx)
	}
}
