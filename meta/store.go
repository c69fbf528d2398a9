package meta

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxRetries bounds optimistic-transaction retries before ErrConflict.
const maxRetries = 64

// maxTxnOps stays under etcd's default --max-txn-ops (128).
const maxTxnOps = 100

// get reads and strictly decodes the record at key into r and returns its
// mod revision. A missing key is ErrNotFound.
func (s *Store) get(ctx context.Context, key string, r record) (int64, error) {
	resp, err := s.kv.Get(ctx, key)
	if err != nil {
		return 0, s.wrap("read "+s.keys.describe(key), err)
	}
	if len(resp.Kvs) == 0 {
		return 0, classErrorf(ErrNotFound, "%s not found", s.keys.describe(key))
	}
	return resp.Kvs[0].ModRevision, decode(key, resp.Kvs[0].Value, r)
}

// list reads every record under prefix, decoding each with fresh(), in key
// order, and returns the revision of the read.
func list[R record](ctx context.Context, s *Store, prefix string, fresh func() R) ([]R, int64, error) {
	return listKeys(ctx, s, prefix, s.keys.describe(prefix), func(kv *mvccpb.KeyValue) (R, error) {
		r := fresh()
		return r, decodeKV(kv, r)
	})
}

// listKeys reads every key under prefix and converts each with conv, in
// key order, and returns the revision of the read. what names the keys in
// the error of a failed read.
func listKeys[T any](ctx context.Context, s *Store, prefix, what string, conv func(*mvccpb.KeyValue) (T, error)) ([]T, int64, error) {
	resp, err := s.kv.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, s.wrap("list "+what, err)
	}
	out := make([]T, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		v, err := conv(kv)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, v)
	}
	return out, resp.Header.Revision, nil
}

// decodeKV decodes one key-value of a range response.
func decodeKV(kv *mvccpb.KeyValue, r record) error {
	return decode(string(kv.Key), kv.Value, r)
}

// putOp encodes r for key.
func putOp(key string, r record, opts ...clientv3.OpOption) (clientv3.Op, error) {
	b, err := encode(r)
	if err != nil {
		return clientv3.Op{}, fmt.Errorf("encode %s: %w", key, err)
	}
	return clientv3.OpPut(key, string(b), opts...), nil
}

// create writes r at key only if the key does not exist (ErrExists) and
// the compares more hold (ErrConflict when only they fail).
func (s *Store) create(ctx context.Context, key string, r record, more ...clientv3.Cmp) error {
	op, err := putOp(key, r)
	if err != nil {
		return err
	}
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}, more...)
	resp, err := s.kv.Txn(ctx).If(cmps...).Then(op).Else(clientv3.OpGet(key, clientv3.WithCountOnly())).Commit()
	if err != nil {
		return s.wrap("create "+s.keys.describe(key), err)
	}
	if !resp.Succeeded {
		if resp.Responses[0].GetResponseRange().Count == 0 {
			return classErrorf(ErrConflict, "create %s: what it depends on changed", s.keys.describe(key))
		}
		return classErrorf(ErrExists, "%s already exists", s.keys.describe(key))
	}
	return nil
}

// errUnchanged, returned by an update's fn, says the record already holds
// what it would write: update writes nothing and returns nil.
var errUnchanged = errors.New("unchanged")

// update rewrites the record at key with fn, comparing the mod revision it
// read, retrying on conflict. fn may return an error to stop (errUnchanged:
// stop without an error).
func update[R record](ctx context.Context, s *Store, key string, fresh func() R, fn func(R) error) error {
	for range maxRetries {
		r := fresh()
		rev, err := s.get(ctx, key, r)
		if err != nil {
			return err
		}
		if err := fn(r); errors.Is(err, errUnchanged) {
			return nil
		} else if err != nil {
			return err
		}
		op, err := putOp(key, r)
		if err != nil {
			return err
		}
		resp, err := s.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(op).Commit()
		if err != nil {
			return s.wrap("update "+s.keys.describe(key), err)
		}
		if resp.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("update %s: %w", s.keys.describe(key), ErrConflict)
}
