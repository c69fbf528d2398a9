package capacity

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
	nss, err := s.Namespaces(ctx)
	if err != nil {
		return Input{}, 0, err
	}
	allocs, err := s.Allocations(ctx)
	if err != nil {
		return Input{}, 0, err
	}
	for _, n := range nss {
		a, err := meta.AllocationOf(allocs, n)
		if err != nil {
			return Input{}, 0, err
		}
		in.Namespaces = append(in.Namespaces, meta.PlacementNamespace(n, a))
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

// judgeNew judges creating v in the cluster in. Nothing is said of a
// volume whose name is taken: creating says so (and a repeated create, as
// CSI sends, is not refused for the space the volume already promises).
func judgeNew(in Input, limit float64, v Volume) (string, error) {
	if v.K < 1 || v.M < 0 || v.Size <= 0 {
		return "", nil // not a layout: creating the volume says why
	}
	return judge(in, limit, func(vols []Volume) ([]Volume, Volume, bool) {
		if slices.ContainsFunc(vols, func(o Volume) bool { return o.Name == v.Name }) {
			return vols, Volume{}, false
		}
		return append(vols, v), v, true
	})
}

// judgeResize judges growing volume name to size bytes in the cluster in.
func judgeResize(in Input, limit float64, name string, size int64) (string, error) {
	return judge(in, limit, func(vols []Volume) ([]Volume, Volume, bool) {
		for i := range vols {
			if vols[i].Name == name && size > vols[i].Size {
				vols[i].Size = size
				return vols, vols[i], true
			}
		}
		return vols, Volume{}, false
	})
}

// judge changes the volumes of in with change and judges the result
// (Check) for the volume change names.
func judge(in Input, limit float64, change func([]Volume) ([]Volume, Volume, bool)) (string, error) {
	vols, v, ok := change(slices.Clone(in.Volumes))
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

// maxJudgements bounds how often a create or resize is judged again
// because the cluster changed between its judgement and its transaction.
const maxJudgements = 32

// guarded judges a change on a view of s pinned at one revision and makes
// it with commit under a guard that nothing judged changed since (one etcd
// transaction), judging again from a fresh view when something did: two
// concurrent creates cannot both pass a judgement that holds for one.
func guarded(ctx context.Context, s *meta.Store, what string, judgeIn func(Input, float64) (string, error),
	commit func(meta.Unchanged) (*meta.VolumeRecord, error)) (*meta.VolumeRecord, string, error) {
	for range maxJudgements {
		view, err := s.At(ctx)
		if err != nil {
			return nil, "", err
		}
		in, limit, err := Load(ctx, view)
		if errors.Is(err, meta.ErrCompacted) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		warn, err := judgeIn(in, limit)
		if err != nil {
			return nil, "", err
		}
		rec, err := commit(meta.Unchanged{Rev: view.Rev(), Namespaces: counted(in)})
		if errors.Is(err, meta.ErrConflict) {
			continue
		}
		return rec, warn, err
	}
	return nil, "", fmt.Errorf("%s: the cluster's volumes, namespaces or settings changed under each of %d judgements of its space; try again: %w",
		what, maxJudgements, meta.ErrConflict)
}

// counted returns the ids of the namespaces in counts as space.
func counted(in Input) []string {
	var ids []string
	for _, n := range in.Namespaces {
		if takesShards(n.State) {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// CreateVolume creates the volume of spec in the cluster of s if the
// cluster's space allows it (Check: a warning past 1, an ErrOvercommitted
// refusal past the limit), judging and creating in one transaction, and
// returns its record with the judgement's warning (returned even when
// creating fails, as it was said first).
func CreateVolume(ctx context.Context, s *meta.Store, spec meta.VolumeSpec) (*meta.VolumeRecord, string, error) {
	v := Volume{Name: spec.Name, Size: spec.Size, K: spec.Layout.K, M: spec.Layout.M, Shared: spec.AllowSharedDomains}
	return guarded(ctx, s, "create volume "+spec.Name,
		func(in Input, limit float64) (string, error) { return judgeNew(in, limit, v) },
		func(u meta.Unchanged) (*meta.VolumeRecord, error) { return s.CreateVolumeIf(ctx, spec, u) })
}

// ResizeVolume grows volume name to size bytes if the cluster's space
// allows it, like CreateVolume. Nothing is judged when there is no such
// volume or it does not grow: resizing says why.
func ResizeVolume(ctx context.Context, s *meta.Store, name string, size int64) (*meta.VolumeRecord, string, error) {
	return guarded(ctx, s, "resize volume "+name,
		func(in Input, limit float64) (string, error) { return judgeResize(in, limit, name, size) },
		func(u meta.Unchanged) (*meta.VolumeRecord, error) { return s.ResizeVolumeIf(ctx, name, size, u) })
}
