package meta

import (
	"context"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// clustersRoot is the prefix of every cluster's keys (newKeys).
const clustersRoot = "/nvstripe/"

// maxClusterNames bounds how many names ClusterNames returns.
const maxClusterNames = 100

// ClusterNames lists the clusters initialized at the store's etcd (those
// with a cluster record, whatever cluster the store was opened for), in
// name order, at most maxClusterNames. It reads two keys per cluster: it
// jumps over each cluster's keys instead of listing them.
func (s *Store) ClusterNames(ctx context.Context) ([]string, error) {
	var names []string
	from, end := clustersRoot, clientv3.GetPrefixRangeEnd(clustersRoot)
	for len(names) < maxClusterNames {
		resp, err := s.kv.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(1), clientv3.WithKeysOnly())
		if err != nil {
			return nil, s.wrap("list clusters", err)
		}
		if len(resp.Kvs) == 0 {
			break
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(string(resp.Kvs[0].Key), clustersRoot), "/")
		rec, err := s.kv.Get(ctx, newKeys(name).cluster(), clientv3.WithCountOnly())
		if err != nil {
			return nil, s.wrap("list clusters", err)
		}
		if rec.Count > 0 {
			names = append(names, name)
		}
		from = clustersRoot + name + "0" // '0' follows '/': past every key of this cluster
	}
	slices.Sort(names) // keys sort "a.x/" before "a/"
	return names, nil
}
