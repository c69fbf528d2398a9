package meta

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nvstripe/nvstripe/placement"
)

// VolumeSpec is what CreateVolume needs.
type VolumeSpec struct {
	Name   string
	Size   int64 // bytes, a multiple of BlockSize (4 KiB)
	Layout Layout
	// AllowSharedDomains lets shards of a segment share a failure domain
	// when the cluster has fewer domains than K+M.
	AllowSharedDomains bool
	// BindChecksums gives the volume a random Layout.ChecksumSeed (format
	// 4: checksums bound to their place). It needs Layout.Checksum.
	BindChecksums bool
	// QoS limits the volume's IO wherever it is mapped (zero: none).
	QoS QoS
}

// CreateVolume records a new volume. It fails with ErrExists for a taken
// name, ErrInvalid for a bad size or layout, and placement's
// ErrNotEnoughDomains when K+M exceeds the failure domains in service
// (unless AllowSharedDomains). No space is allocated: segments are placed
// on first write (thin provisioning).
func (s *Store) CreateVolume(ctx context.Context, spec VolumeSpec) (*VolumeRecord, error) {
	return s.createVolume(ctx, spec, nil)
}

// createVolume is CreateVolume whose transaction also compares cmps.
func (s *Store) createVolume(ctx context.Context, spec VolumeSpec, cmps []clientv3.Cmp) (*VolumeRecord, error) {
	c, err := s.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	if spec.BindChecksums {
		if spec.Layout.ChecksumSeed, err = newChecksumSeed(); err != nil {
			return nil, err
		}
	}
	if err := spec.Layout.Check(c.SlotSize); err != nil {
		return nil, err
	}
	rec := &VolumeRecord{Name: spec.Name, Size: spec.Size, Layout: spec.Layout, AllowSharedDomains: spec.AllowSharedDomains, State: VolumeReady, QoS: spec.QoS}
	if err := rec.check(); err != nil {
		return nil, fmt.Errorf("volume %s: %w: %w", spec.Name, ErrInvalid, err)
	}
	if err := s.checkPlaceable(ctx, spec); err != nil {
		return nil, err
	}
	if err := s.create(ctx, s.keys.volume(spec.Name), rec, cmps...); err != nil {
		switch {
		case errors.Is(err, ErrExists):
			return nil, classErrorf(ErrExists, "volume %q already exists", spec.Name)
		case errors.Is(err, ErrConflict):
			return nil, classErrorf(ErrConflict, "create volume %s: the cluster's volumes, namespaces or settings changed since they were read", spec.Name)
		}
		return nil, err
	}
	return rec, nil
}

// newChecksumSeed returns a random, non-zero Layout.ChecksumSeed.
func newChecksumSeed() (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("choosing a checksum seed: %w", err)
		}
		if seed := binary.LittleEndian.Uint64(b[:]); seed != 0 {
			return seed, nil
		}
	}
}

// checkPlaceable refuses a layout wider than the failure domains in service.
func (s *Store) checkPlaceable(ctx context.Context, spec VolumeSpec) error {
	var domains int
	err := s.withSnapshot(ctx, func(sn *snapshot) error {
		c, err := sn.cluster()
		if err == nil {
			domains = c.Domains()
		}
		return err
	})
	if err != nil {
		return err
	}
	n := spec.Layout.K + spec.Layout.M
	if domains == 0 {
		return fmt.Errorf("volume %s: no namespaces in service to place it on (add hosts and namespaces first): %w", spec.Name, placement.ErrNoSpace)
	}
	if n > domains && !spec.AllowSharedDomains {
		return fmt.Errorf("volume %s: layout %d+%d needs %d failure domains, the cluster has %d in service (add hosts, choose a narrower layout, or pass --allow-shared-domains): %w",
			spec.Name, spec.Layout.K, spec.Layout.M, n, domains, placement.ErrNotEnoughDomains)
	}
	return nil
}

// Volumes lists the volumes in name order.
func (s *Store) Volumes(ctx context.Context) ([]*VolumeRecord, error) {
	vs, _, err := list(ctx, s, s.keys.volumes(), func() *VolumeRecord { return &VolumeRecord{} })
	return vs, err
}

// Volume reads one volume (ErrNotFound when there is none by that name).
func (s *Store) Volume(ctx context.Context, name string) (*VolumeRecord, error) {
	v, _, err := s.volume(ctx, name)
	return v, err
}

// VolumeRev reads one volume like Volume and also returns the revision of
// the read: WatchVolume from it misses no change.
func (s *Store) VolumeRev(ctx context.Context, name string) (*VolumeRecord, int64, error) {
	if err := checkName("volume", name); err != nil {
		return nil, 0, err
	}
	key := s.keys.volume(name)
	resp, err := s.kv.Get(ctx, key)
	if err != nil {
		return nil, 0, s.wrap("read "+s.keys.describe(key), err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, classErrorf(ErrNotFound, "volume %q not found", name)
	}
	v := &VolumeRecord{}
	return v, resp.Header.Revision, decodeKV(resp.Kvs[0], v)
}

func (s *Store) volume(ctx context.Context, name string) (*VolumeRecord, int64, error) {
	if err := checkName("volume", name); err != nil {
		return nil, 0, err
	}
	v := &VolumeRecord{}
	rev, err := s.get(ctx, s.keys.volume(name), v)
	if errors.Is(err, ErrNotFound) {
		return nil, 0, classErrorf(ErrNotFound, "volume %q not found", name)
	}
	return v, rev, err
}

// ResizeVolume grows a volume to size bytes (a multiple of BlockSize).
// Shrinking is refused: it would discard data past the new end.
func (s *Store) ResizeVolume(ctx context.Context, name string, size int64) (*VolumeRecord, error) {
	if _, _, err := s.volume(ctx, name); err != nil {
		return nil, err
	}
	var out *VolumeRecord
	err := update(ctx, s, s.keys.volume(name), func() *VolumeRecord { return &VolumeRecord{} }, func(v *VolumeRecord) error {
		if err := v.checkResize(name, size); err != nil {
			return err
		}
		v.Size, out = size, v
		return nil
	})
	return out, err
}

// checkResize says why volume v (named name) cannot be resized to size
// bytes, or nothing.
func (v *VolumeRecord) checkResize(name string, size int64) error {
	switch {
	case v.State != VolumeReady:
		return fmt.Errorf("volume %s is %s: %w", name, v.State, ErrInvalid)
	case size < v.Size:
		return fmt.Errorf("volume %s: shrinking from %d to %d bytes is not supported: %w", name, v.Size, size, ErrInvalid)
	case size%BlockSize != 0:
		return fmt.Errorf("volume %s: size %d is not a multiple of %d bytes: %w", name, size, BlockSize, ErrInvalid)
	}
	return nil
}

// DeleteVolume removes a volume and frees its slots. A volume with an owner
// (mapped) is refused with ErrBusy. The volume is first marked deleting (no
// one can map it any more); an interrupted delete resumes when run again.
func (s *Store) DeleteVolume(ctx context.Context, name string) error {
	if err := s.markDeleting(ctx, name); err != nil {
		return err
	}
	m, err := s.VolumeMap(ctx, name, nil)
	if err != nil {
		return err
	}
	segs, _, err := m.Segments(ctx)
	if err != nil {
		return err
	}
	for seg := range segs {
		if err := m.Free(ctx, seg); err != nil {
			return err
		}
	}
	_, err = s.kv.Txn(ctx).Then(
		clientv3.OpDelete(s.keys.dirties(name), clientv3.WithPrefix()),
		clientv3.OpDelete(s.keys.stales(name), clientv3.WithPrefix()),
		clientv3.OpDelete(s.keys.unsettleds(name), clientv3.WithPrefix()),
		clientv3.OpDelete(s.keys.segments(name), clientv3.WithPrefix()),
		clientv3.OpDelete(s.keys.lastRW(name)),
		clientv3.OpDelete(s.keys.volume(name)),
	).Commit()
	return s.wrap("delete volume "+name, err)
}

// markDeleting sets the volume's state to deleting if it has no owner.
func (s *Store) markDeleting(ctx context.Context, name string) error {
	for range maxRetries {
		v, rev, err := s.volume(ctx, name)
		if err != nil {
			return err
		}
		owners, err := s.Owners(ctx, name)
		if err != nil {
			return err
		}
		if len(owners) > 0 {
			return fmt.Errorf("volume %s is mapped (%s by %s, epoch %d); unmap it first: %w",
				name, owners[0].Mode, owners[0].Holder, owners[0].Epoch, ErrBusy)
		}
		if v.State == VolumeDeleting {
			return nil
		}
		v.State = VolumeDeleting
		op, err := putOp(s.keys.volume(name), v)
		if err != nil {
			return err
		}
		resp, err := s.kv.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(s.keys.volume(name)), "=", rev),
			clientv3.Compare(clientv3.CreateRevision(s.keys.owners(name)), "=", 0).WithPrefix(),
		).Then(op).Commit()
		if err != nil {
			return s.wrap("delete volume "+name, err)
		}
		if resp.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("delete volume %s: %w", name, ErrConflict)
}
