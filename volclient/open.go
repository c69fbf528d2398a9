package volclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/retry"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volume"
)

// OpenOptions configure OpenVolume.
type OpenOptions struct {
	// Holder names this owner in etcd. Required.
	Holder string
	// ReadOnly takes a shared read-only lease: the mapping reads and
	// follows the volume's moves (follower), and never writes. Default
	// false.
	ReadOnly bool
	// Mover takes the read-write lease as the controller's mover
	// (meta.OwnerOptions.Mover): readers may stay mapped, so the open
	// volume must only move shards and repair slots, never change data.
	// Default false.
	Mover bool
	// LeaseTTL is the ownership lease's time to live (meta.OwnerOptions.TTL):
	// how long the volume stays owned, and this process keeps writing, when
	// etcd cannot be reached. Default meta's (10s).
	LeaseTTL time.Duration
	// OnRenewal hears every renewal of the ownership lease
	// (meta.OwnerOptions.OnRenewal). Default nil.
	OnRenewal func(took time.Duration, err error)
	// Namespaces say how to reach the namespaces.
	Namespaces NamespaceOptions
	// Events receives the volume's events.
	Events volume.EventListener
	// Logf receives a line when slots that missed writes are rebuilt in
	// place, and when a namespace that was down is used again. Default:
	// discarded.
	Logf func(format string, args ...any)
	// RecheckInterval is how often the volume's namespaces that are treated
	// as down are probed; one that answers (with its label) is used again.
	// A read-write owner then rebuilds in place the slots it missed; a
	// read-only mapping only reads from it again (nothing was written while
	// it was mapped, and slots marked stale before stay unused). Default 10s;
	// negative is refused.
	RecheckInterval time.Duration

	// followHold, when set, is called by a read-only mapping before it
	// switches a segment to the slots a move committed: a test holds a
	// reader back with it.
	followHold func(seg int64)
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
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("volume %s: %w", name, err)
	}
	rec, err := store.Volume(ctx, name)
	if err != nil {
		return nil, err
	}
	cluster, err := store.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	owner, err := acquire(ctx, store, name, o, logf)
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

// check says why o cannot open a volume (class blockdev.ErrInvalid), before
// anything is taken: what needs no IO to see (Namespaces.Check also binds
// HostTraddr).
func (o OpenOptions) check() error {
	var err error
	if o.RecheckInterval < 0 {
		err = fmt.Errorf("RecheckInterval %v: negative: give 0 (the default, 10s) or more: %w", o.RecheckInterval, blockdev.ErrInvalid)
	}
	return errors.Join(err, o.Namespaces.checkLimits())
}

func open(ctx context.Context, store *meta.Store, rec *meta.VolumeRecord, cluster *meta.ClusterRecord, owner *meta.Owner, o OpenOptions) (*Mapped, error) {
	vm, err := store.VolumeMap(ctx, rec.Name, owner)
	if err != nil {
		return nil, err
	}
	if !o.ReadOnly {
		o.Namespaces.Session = NewSession(cluster, rec.Name, owner.Epoch(), owner.Lose)
		o.Namespaces.Session.Logf = o.Logf
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var alloc volume.Allocator = segmentMap{vm}
	var fol *follower
	var rev int64
	if o.ReadOnly {
		if fol, rev, err = newFollower(ctx, vm, owner, logf); err != nil {
			return nil, fmt.Errorf("volume %s: reading the segment map: %w", rec.Name, err)
		}
		fol.hold = o.followHold
		alloc = fol
	}
	devs, err := NewNamespaces(ctx, store, o.Namespaces)
	if err != nil {
		return nil, err
	}
	g := rec.Layout.Geometry(cluster.SlotSize)
	vol, err := volume.New(volume.Options{
		Geometry: g, Size: rec.Size, Devices: leased{devs, owner.Valid}, ReadOnly: o.ReadOnly,
		Alloc: alloc, Dirty: segmentMap{vm}, Stale: segmentMap{vm}, Unsettled: segmentMap{vm}, Events: o.Events,
		LogEpoch: owner.Epoch(),
	})
	if err != nil {
		devs.Close()
		return nil, err
	}
	m := &Mapped{Volume: vol, Owner: owner, Map: vm, Record: rec, devs: devs}
	if o.ReadOnly {
		if err := vol.FollowUnsettled(ctx); err != nil { // blanks the owner's rebuilds wrote read as corrupt, not zeros
			devs.Close()
			return nil, fmt.Errorf("volume %s: %w", rec.Name, err)
		}
	} else {
		if err := vol.LoadUnsettled(ctx); err != nil { // before a resumed move rebuilds a slot
			devs.Close()
			return nil, fmt.Errorf("volume %s: %w", rec.Name, err)
		}
		if err := m.claimAll(ctx); err != nil {
			devs.Close()
			return nil, fmt.Errorf("volume %s: %w", rec.Name, err)
		}
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
	if fol != nil {
		fol.vol = vol
		m.bg.Go(func() { fol.run(watch, rev) })
	}
	m.bg.Go(func() { m.maintain(watch, cmp.Or(o.RecheckInterval, 10*time.Second), !o.ReadOnly, logf) })
	return m, nil
}

// leased is the volume's DeviceSet: every namespace behind a fence over
// the ownership lease (blockdev.NewLeaseFence over meta.Owner.Valid). Once
// the lease is not certainly held, every IO fails with blockdev.ErrFenced,
// and so does every read that completes after that moment, whenever it
// was issued: a slot it read may have been released (a reader's lease ran
// out, so the mover stopped waiting for it) and written by another
// volume. Readers are not fenced on the storage, and no owner's reads are,
// so this is what keeps a process paused past its lease from returning
// another volume's bytes when it resumes.
type leased struct {
	devs  *Namespaces
	valid func() error
}

func (l leased) Device(ctx context.Context, id string) (blockdev.Device, error) {
	d, err := l.devs.Device(ctx, id)
	if err != nil {
		return nil, err
	}
	return blockdev.NewLeaseFence(d, l.valid), nil
}

// claimAll claims, in parallel, every namespace the volume has a slot or a
// move target on, before the first write (Namespaces.Device claims as it
// connects): from then on the storage refuses the volume's earlier owners.
// A namespace that cannot be reached is claimed when a probe connects it.
// It fails only when the storage says this owner is stale (ErrFenced).
func (m *Mapped) claimAll(ctx context.Context) error {
	segs, _, err := m.Map.Segments(ctx)
	if err != nil {
		return err
	}
	ids := map[string]bool{}
	for _, rec := range segs {
		for _, sl := range rec.Slots {
			ids[sl.NS] = true
		}
		if rec.Move != nil {
			ids[rec.Move.To.NS] = true
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	for id := range ids {
		wg.Go(func() {
			if _, err := m.devs.Device(ctx, id); blockdev.Class(err) == blockdev.ErrFenced {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// maintain is the mapping's background upkeep: every interval it brings
// back namespaces that answer again. A read-write owner (repair) also
// rebuilds the slots marked stale under an earlier owner, at once, those a
// returning namespace missed, and, every interval while there are any, the
// stripes of slots whose namespace is up that writes missed (for lack of
// space, once space is back) or that a read error made it distrust. A
// read-only mapping repairs nothing (the marks are the writers'; the
// controller repairs once it is unmapped).
// A namespace that stays down is left to the controller, which moves its
// slots elsewhere once it marks it out.
func (m *Mapped) maintain(ctx context.Context, every time.Duration, repair bool, logf func(string, ...any)) {
	if repair {
		m.repairStale(ctx, logf)
	}
	retry.Every(ctx, every, func() {
		back := m.reinstate(ctx, min(every, 5*time.Second), logf)
		if repair && (back > 0 || m.Volume.NeedsRepair()) {
			m.repairStale(ctx, logf)
		}
	})
}

// reinstate probes each namespace the volume treats as down and puts back
// into use those that answer. It returns how many came back.
func (m *Mapped) reinstate(ctx context.Context, timeout time.Duration, logf func(string, ...any)) int {
	n := 0
	for _, id := range m.Volume.DownNamespaces() {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := m.devs.Probe(pctx, id)
		cancel()
		if err != nil {
			continue
		}
		back, err := m.Volume.Reinstate(ctx, id)
		if err != nil {
			logf("volume %s: namespace %s answers again but putting it back failed: %v", m.Record.Name, id, err)
			continue
		}
		if back {
			n++
			logf("volume %s: namespace %s answers again and is used again", m.Record.Name, id)
		}
	}
	return n
}

// repairStale rebuilds in place the slots that missed writes (under an
// earlier owner: the volume's stale marks; or in this open) and whose
// namespace is up. Slots of namespaces still down stay marked: the
// controller rebuilds those elsewhere once it marks the namespace out.
func (m *Mapped) repairStale(ctx context.Context, logf func(string, ...any)) {
	n, err := m.Volume.Repair(ctx)
	if n == 0 && err == nil {
		return
	}
	if err != nil && ctx.Err() == nil {
		logf("volume %s: rebuilding slots that missed writes: %d stripes, then: %v", m.Record.Name, n, err)
		return
	}
	logf("volume %s: rebuilt %d stripes of slots that missed writes", m.Record.Name, n)
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
