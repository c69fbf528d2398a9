package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volume"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// OpenOptions configure OpenVolume.
type OpenOptions struct {
	// Holder names this owner in etcd. Required.
	Holder string
	// ReadOnly takes a shared read-only lease. Default false.
	ReadOnly bool
	// LeaseTTL is the ownership lease's time to live (meta.OwnerOptions.TTL):
	// how long the volume stays owned, and this process keeps writing, when
	// etcd cannot be reached. Default meta's (10s).
	LeaseTTL time.Duration
	// Namespaces say how to reach the namespaces.
	Namespaces NamespaceOptions
	// Events receives the volume's events.
	Events volume.EventListener
	// Logf receives a line when slots that missed writes before this open
	// are rebuilt in place. Default: discarded.
	Logf func(format string, args ...any)
}

// Mapped is an open volume owned by this process.
type Mapped struct {
	Volume *volume.Volume
	Owner  *meta.Owner
	Map    *meta.VolumeMap
	Record *meta.VolumeRecord

	devs      *Namespaces
	closeOnce sync.Once
	closeErr  error
	stop      context.CancelFunc
	bg        sync.WaitGroup // background repair, stopped by Close
}

// OpenVolume takes ownership of volume name, connects its placement and
// namespaces, and resyncs segments a previous owner left dirty. When the
// ownership lease is lost the volume is closed at once (writes fail), so a
// stale owner never writes.
func OpenVolume(ctx context.Context, store *meta.Store, name string, o OpenOptions) (*Mapped, error) {
	rec, err := store.Volume(ctx, name)
	if err != nil {
		return nil, err
	}
	cluster, err := store.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	owner, err := store.Acquire(ctx, name, meta.OwnerOptions{Holder: o.Holder, ReadOnly: o.ReadOnly, TTL: o.LeaseTTL})
	if err != nil {
		return nil, fmt.Errorf("volume %s: taking ownership: %w", name, err)
	}
	m, err := open(ctx, store, rec, cluster, owner, o)
	if err != nil {
		owner.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	return m, nil
}

func open(ctx context.Context, store *meta.Store, rec *meta.VolumeRecord, cluster *meta.ClusterRecord, owner *meta.Owner, o OpenOptions) (*Mapped, error) {
	vm, err := store.VolumeMap(ctx, rec.Name, owner)
	if err != nil {
		return nil, err
	}
	devs, err := NewNamespaces(ctx, store, o.Namespaces)
	if err != nil {
		return nil, err
	}
	g := layout.Geometry{K: rec.Layout.K, M: rec.Layout.M, Chunk: rec.Layout.Chunk, SlotSize: cluster.SlotSize}
	vol, err := volume.New(volume.Options{
		Geometry: g, Size: rec.Size, Devices: devs,
		Alloc: segmentMap{vm}, Dirty: segmentMap{vm}, Stale: segmentMap{vm}, Events: o.Events,
	})
	if err != nil {
		devs.Close()
		return nil, err
	}
	m := &Mapped{Volume: vol, Owner: owner, Map: vm, Record: rec, devs: devs}
	if !o.ReadOnly {
		if _, err := m.ResumeMoves(ctx); err != nil {
			devs.Close()
			return nil, fmt.Errorf("volume %s: %w", rec.Name, err)
		}
		if _, err := vol.Recover(ctx); err != nil {
			devs.Close()
			return nil, fmt.Errorf("volume %s: resync after an unclean stop: %w", rec.Name, err)
		}
	}
	watch, stop := context.WithCancel(context.Background())
	m.stop = stop
	go m.fenceOnLoss(watch)
	if !o.ReadOnly {
		m.bg.Go(func() { m.repairStale(watch, o.Logf) })
	}
	return m, nil
}

// repairStale rebuilds in place the slots that missed writes while their
// namespace was unreachable under an earlier owner (the volume's stale
// marks) and whose namespace answers again. Slots of namespaces still down
// stay marked: the controller rebuilds those elsewhere once it marks the
// namespace out.
func (m *Mapped) repairStale(ctx context.Context, logf func(string, ...any)) {
	n, err := m.Volume.Repair(ctx)
	if logf == nil || (n == 0 && err == nil) {
		return
	}
	if err != nil && ctx.Err() == nil {
		logf("volume %s: rebuilding slots that missed writes: %d stripes, then: %v", m.Record.Name, n, err)
		return
	}
	logf("volume %s: rebuilt %d stripes of slots that missed writes under an earlier owner", m.Record.Name, n)
}

// fenceOnLoss closes the volume the moment ownership is lost.
func (m *Mapped) fenceOnLoss(watch context.Context) {
	select {
	case <-m.Owner.Context().Done():
		m.Volume.Close()
	case <-watch.Done():
	}
}

// Close flushes the volume, marks idle segments clean, releases ownership and
// closes the connections. It is idempotent.
func (m *Mapped) Close(ctx context.Context) error {
	m.closeOnce.Do(func() {
		m.stop()
		m.bg.Wait()
		var errs []error
		if m.Owner.Context().Err() == nil {
			errs = append(errs, m.Volume.Clean(ctx))
		}
		errs = append(errs, m.Volume.Close(), m.Owner.Release(ctx), m.devs.Close())
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}
