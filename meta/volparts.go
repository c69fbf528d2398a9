package meta

import (
	"context"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// rangePage is the most keys one request of a paged range read returns: a
// thousand records keep each response to a few megabytes at most (a segment
// record is well under a kilobyte at common layouts) however many volumes
// the cluster has.
var rangePage int64 = 1000

// rangePrefix calls fn on every key-value under prefix, in key order, read
// rangePage keys a request, every page at one revision: the view's, or for
// the live store the revision of the first page. It returns that revision.
func (s *Store) rangePrefix(ctx context.Context, prefix string, fn func(*mvccpb.KeyValue) error) (int64, error) {
	from, end, rev := prefix, clientv3.GetPrefixRangeEnd(prefix), s.rev
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(rangePage)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.kv.Get(ctx, from, opts...)
		if err != nil {
			return 0, s.wrap("list "+s.keys.describe(prefix), err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if err := fn(kv); err != nil {
				return 0, err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// VolumeParts is what the controller reads of a volume besides its record:
// its current owners, its allocated segments by index and its stale slot
// marks, as Owners, VolumeMap.Segments and VolumeMap.Stale list them.
type VolumeParts struct {
	Owners   []OwnerInfo
	Segments map[int64]*SegmentRecord
	Stale    []StaleMark
}

// VolumesParts reads the parts of the named volumes in one paged range
// read per prefix (owners, segments, stale marks) instead of three reads a
// volume, all at one revision (the view's; a live store pins the current
// one first). Records of volumes not named are skipped undecoded. Every
// named volume has an entry, with empty parts when it has no records.
func (s *Store) VolumesParts(ctx context.Context, names []string) (map[string]*VolumeParts, error) {
	if s.rev == 0 {
		view, err := s.At(ctx)
		if err != nil {
			return nil, err
		}
		s = view
	}
	out := make(map[string]*VolumeParts, len(names))
	for _, n := range names {
		out[n] = &VolumeParts{Owners: []OwnerInfo{}, Segments: map[int64]*SegmentRecord{}, Stale: []StaleMark{}}
	}
	// each picks the named volume a key under base belongs to.
	each := func(base string, fn func(kv *mvccpb.KeyValue, vp *VolumeParts, vol string) error) error {
		_, err := s.rangePrefix(ctx, base, func(kv *mvccpb.KeyValue) error {
			vol, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), base), "/")
			if vp := out[vol]; vp != nil {
				return fn(kv, vp, vol)
			}
			return nil
		})
		return err
	}
	err := each(s.keys.allOwners(), func(kv *mvccpb.KeyValue, vp *VolumeParts, _ string) error {
		o, err := ownerKV(kv)
		if err == nil {
			vp.Owners = append(vp.Owners, o)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	err = each(s.keys.allSegments(), func(kv *mvccpb.KeyValue, vp *VolumeParts, vol string) error {
		i, r, err := segmentKV(kv, s.keys.segments(vol))
		if err == nil {
			vp.Segments[i] = r
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	err = each(s.keys.allStales(), func(kv *mvccpb.KeyValue, vp *VolumeParts, vol string) error {
		m, err := staleKV(kv, s.keys.stales(vol))
		if err == nil {
			vp.Stale = append(vp.Stale, m)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
