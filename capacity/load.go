package capacity

import (
	"context"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/placement"
)

// Load reads the cluster's hosts, namespaces (with their use) and volumes
// from s, and its overcommit limit.
func Load(ctx context.Context, s *meta.Store) (Input, float64, error) {
	cl, err := s.Cluster(ctx)
	if err != nil {
		return Input{}, 0, err
	}
	in := Input{SlotSize: cl.SlotSize, DomainLabel: cl.DomainLabel}
	hosts, err := s.Hosts(ctx)
	if err != nil {
		return Input{}, 0, err
	}
	for _, h := range hosts {
		in.Hosts = append(in.Hosts, placement.Host{Name: h.Name, Labels: h.Labels})
	}
	uses, err := s.NamespaceUses(ctx)
	if err != nil {
		return Input{}, 0, err
	}
	for _, u := range uses {
		st, err := placement.ParseState(u.State)
		if err != nil {
			return Input{}, 0, err
		}
		in.Namespaces = append(in.Namespaces, Namespace{ID: u.ID, Host: u.Host, State: st,
			Capacity: u.Capacity(), Used: u.UsedBytes / cl.SlotSize})
	}
	vols, err := s.Volumes(ctx)
	if err != nil {
		return Input{}, 0, err
	}
	for _, v := range vols {
		in.Volumes = append(in.Volumes, Volume{Name: v.Name, Size: v.Size, K: v.Layout.K, M: v.Layout.M, Shared: v.AllowSharedDomains})
	}
	return in, cl.OvercommitLimit(), nil
}

// Of reads the cluster's space from s.
func Of(ctx context.Context, s *meta.Store) (*Report, error) {
	in, _, err := Load(ctx, s)
	if err != nil {
		return nil, err
	}
	return Compute(in)
}

// CheckNewVolume judges a volume about to be created in the cluster of s
// (see Check): a warning to print, or an ErrOvercommitted refusal.
func CheckNewVolume(ctx context.Context, s *meta.Store, v Volume) (warning string, err error) {
	if v.K < 1 || v.M < 0 || v.Size <= 0 {
		return "", nil // not a layout: creating the volume says why
	}
	return checkWith(ctx, s, func(vols []Volume) ([]Volume, Volume, bool) { return append(vols, v), v, true })
}

// CheckResize judges growing volume name to size bytes like CheckNewVolume.
// Nothing is said when there is no such volume or it does not grow:
// resizing says why.
func CheckResize(ctx context.Context, s *meta.Store, name string, size int64) (warning string, err error) {
	return checkWith(ctx, s, func(vols []Volume) ([]Volume, Volume, bool) {
		for i := range vols {
			if vols[i].Name == name && size > vols[i].Size {
				vols[i].Size = size
				return vols, vols[i], true
			}
		}
		return vols, Volume{}, false
	})
}

// checkWith loads the cluster, changes its volumes with change and judges
// the result (Check) for the volume change names.
func checkWith(ctx context.Context, s *meta.Store, change func([]Volume) ([]Volume, Volume, bool)) (string, error) {
	in, limit, err := Load(ctx, s)
	if err != nil {
		return "", err
	}
	vols, v, ok := change(in.Volumes)
	if !ok {
		return "", nil
	}
	in.Volumes = vols
	r, err := Compute(in)
	if err != nil {
		return "", err
	}
	return Check(r, v, limit)
}

// CreateVolume creates the volume of spec in the cluster of s once
// CheckNewVolume allows it, and returns its record with CheckNewVolume's
// warning (returned even when creating fails, as it was said first).
func CreateVolume(ctx context.Context, s *meta.Store, spec meta.VolumeSpec) (*meta.VolumeRecord, string, error) {
	warn, err := CheckNewVolume(ctx, s, Volume{Name: spec.Name, Size: spec.Size, K: spec.Layout.K, M: spec.Layout.M,
		Shared: spec.AllowSharedDomains})
	if err != nil {
		return nil, "", err
	}
	rec, err := s.CreateVolume(ctx, spec)
	return rec, warn, err
}

// ResizeVolume grows volume name to size bytes once CheckResize allows it,
// and returns its record with CheckResize's warning.
func ResizeVolume(ctx context.Context, s *meta.Store, name string, size int64) (*meta.VolumeRecord, string, error) {
	warn, err := CheckResize(ctx, s, name, size)
	if err != nil {
		return nil, "", err
	}
	rec, err := s.ResizeVolume(ctx, name, size)
	return rec, warn, err
}
