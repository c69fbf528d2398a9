package meta

import (
	"context"
	"fmt"
	"strings"
)

// VolumeInfo is a volume's record with its allocation and owners, as
// `nvstripe volume info` shows it.
type VolumeInfo struct {
	*VolumeRecord
	Segments  int64       `json:"segments"`
	Allocated int         `json:"allocated_segments"`
	Dirty     int         `json:"dirty_segments"`
	Moving    int         `json:"moving_segments"`
	Owners    []OwnerInfo `json:"owners"`
	// Unsettled counts the blocks that read as corrupt until `nvstripe
	// volume settle` (UnsettledRecord).
	Unsettled UnsettledCount `json:"unsettled"`
}

// VolumeInfo reads volume name's record, segments, dirty log, owners and
// unsettled records.
func (s *Store) VolumeInfo(ctx context.Context, name string) (*VolumeInfo, error) {
	vm, v, err := s.volumeMap(ctx, name, nil)
	if err != nil {
		return nil, err
	}
	segs, _, err := vm.Segments(ctx)
	if err != nil {
		return nil, err
	}
	dirty, err := vm.Dirty(ctx)
	if err != nil {
		return nil, err
	}
	owners, err := s.Owners(ctx, name)
	if err != nil {
		return nil, err
	}
	unsettled, err := vm.Unsettled(ctx)
	if err != nil {
		return nil, err
	}
	info := &VolumeInfo{VolumeRecord: v, Segments: vm.seg.Load(), Allocated: len(segs), Dirty: len(dirty), Owners: owners,
		Unsettled: countUnsettled(unsettled)}
	for _, r := range segs {
		if r.Move != nil {
			info.Moving++
		}
	}
	return info, nil
}

// NamespaceUse is a namespace's record with the bytes its shards use and
// the bytes they may use (its slots but the label's).
type NamespaceUse struct {
	*NamespaceRecord
	UsedBytes     int64 `json:"used_bytes"`
	CapacityBytes int64 `json:"capacity_bytes"`
}

// NamespaceUses lists every namespace with its use, as `nvstripe ns ls`
// shows them.
func (s *Store) NamespaceUses(ctx context.Context) ([]NamespaceUse, error) {
	c, err := s.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	nss, err := s.Namespaces(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]NamespaceUse, 0, len(nss))
	for _, n := range nss {
		al, err := s.Allocation(ctx, n.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, NamespaceUse{NamespaceRecord: n, UsedBytes: al.Used * c.SlotSize, CapacityBytes: n.Capacity() * c.SlotSize})
	}
	return out, nil
}

// ParseLabels reads failure-domain labels KEY=VALUE (`host add --label`,
// a target's gossiped labels). A malformed one is ErrInvalid.
func ParseLabels(specs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, l := range specs {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("label %q: want KEY=VALUE: %w", l, ErrInvalid)
		}
		out[k] = v
	}
	return out, nil
}
