package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volume"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// TaskMover is the controller's controller.Mover: it moves shards of
// volumes nobody has mapped by opening them itself (OpenVolume: ownership,
// interrupted moves settled, dirty segments resynced). Concurrent moves of
// one volume share one open; the volume is closed, and its ownership
// released, when its last move ends. Safe for concurrent use.
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
// be the controller's RunnerConfig.Holder).
func NewTaskMover(store *meta.Store, o OpenOptions) *TaskMover {
	return &TaskMover{store: store, opts: o, open: map[string]*moverVolume{}}
}

// MoveShard implements controller.Mover.
func (t *TaskMover) MoveShard(ctx context.Context, req controller.MoveRequest) error {
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

// acquire opens the volume, or shares the open one.
func (t *TaskMover) acquire(ctx context.Context, name string) (*Mapped, error) {
	t.mu.Lock()
	v := t.open[name]
	if v == nil {
		v = &moverVolume{ready: make(chan struct{})}
		t.open[name] = v
		t.mu.Unlock()
		v.m, v.err = openDegraded(context.WithoutCancel(ctx), t.store, name, t.opts)
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

// openDegraded is OpenVolume for the controller: a namespace that cannot be
// reached (its target is dead, which is why the controller moves data) is
// an unavailable device instead of an error, so the volume opens degraded and
// reconstructs what that namespace held.
func openDegraded(ctx context.Context, store *meta.Store, name string, o OpenOptions) (*Mapped, error) {
	rec, err := store.Volume(ctx, name)
	if err != nil {
		return nil, err
	}
	cluster, err := store.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	owner, err := store.Acquire(ctx, name, meta.OwnerOptions{Holder: o.Holder, TTL: o.LeaseTTL})
	if err != nil {
		return nil, fmt.Errorf("volume %s: taking ownership: %w", name, err)
	}
	m, err := openWith(ctx, store, rec, cluster, owner, o)
	if err != nil {
		owner.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	return m, nil
}

func openWith(ctx context.Context, store *meta.Store, rec *meta.VolumeRecord, cluster *meta.ClusterRecord, owner *meta.Owner, o OpenOptions) (*Mapped, error) {
	vm, err := store.VolumeMap(ctx, rec.Name, owner)
	if err != nil {
		return nil, err
	}
	devs, err := NewNamespaces(ctx, store, o.Namespaces)
	if err != nil {
		return nil, err
	}
	g := layout.Geometry{K: rec.Layout.K, M: rec.Layout.M, Chunk: rec.Layout.Chunk, SlotSize: cluster.SlotSize}
	vol, err := volume.New(volume.Options{Geometry: g, Size: rec.Size, Devices: &degradedSet{ns: devs, store: store},
		Alloc: segmentMap{vm}, Dirty: segmentMap{vm}, Events: o.Events})
	if err != nil {
		devs.Close()
		return nil, err
	}
	m := &Mapped{Volume: vol, Owner: owner, Map: vm, Record: rec, devs: devs}
	if _, err := m.ResumeMoves(ctx); err != nil {
		devs.Close()
		return nil, fmt.Errorf("volume %s: %w", rec.Name, err)
	}
	if _, err := vol.Recover(ctx); err != nil {
		devs.Close()
		return nil, fmt.Errorf("volume %s: resync after an unclean stop: %w", rec.Name, err)
	}
	watch, stop := context.WithCancel(context.Background())
	m.stop = stop
	go m.fenceOnLoss(watch)
	return m, nil
}

// degradedSet is Namespaces with unreachable namespaces as unavailable
// devices.
type degradedSet struct {
	ns    *Namespaces
	store *meta.Store
}

func (d *degradedSet) Device(id string) (blockdev.Device, error) {
	dev, err := d.ns.Device(id)
	if err == nil || !errors.Is(err, blockdev.ErrUnavailable) {
		return dev, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, rerr := d.store.Namespace(ctx, id)
	if rerr != nil {
		return nil, err
	}
	return unavailable{size: rec.Size, err: err}, nil
}

// unavailable is a device whose every IO fails with the error that kept it
// from connecting (marked blockdev.ErrUnavailable).
type unavailable struct {
	size int64
	err  error
}

func (u unavailable) ReadAt(context.Context, []byte, int64) error     { return u.err }
func (u unavailable) WriteAt(context.Context, []byte, int64) error    { return u.err }
func (u unavailable) Flush(context.Context) error                     { return u.err }
func (u unavailable) WriteZeroes(context.Context, int64, int64) error { return u.err }
func (u unavailable) Trim(context.Context, int64, int64) error        { return u.err }
func (u unavailable) Size() int64                                     { return u.size }
func (u unavailable) BlockSize() int                                  { return 4096 }
func (u unavailable) Close() error                                    { return nil }
