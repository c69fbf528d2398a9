package memetcd

import (
	"bytes"
	"context"
	"slices"
	"sort"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// keyspace is the multi-version key space: each key's versions in
// revision order, the last one a tombstone when the key is deleted.
type keyspace struct {
	keys []string // sorted; every key with history
	hist map[string][]version
}

// version is one state of a key from revision rev on; a zero ver is a
// tombstone (the key does not exist).
type version struct {
	rev, create, ver, lease int64
	value                   []byte
}

// event is one change, as a watch delivers it.
type event struct {
	rev  int64
	del  bool
	key  string
	cur  version // the new version (for a delete: rev only)
	prev version // the version before (ver 0: none)
}

// at returns key's version at revision rev (ver 0: none).
func (k *keyspace) at(key string, rev int64) version {
	h := k.hist[key]
	i := sort.Search(len(h), func(i int) bool { return h[i].rev > rev })
	if i == 0 {
		return version{}
	}
	return h[i-1]
}

// latest returns key's current version (ver 0: none).
func (k *keyspace) latest(key string) version {
	h := k.hist[key]
	if len(h) == 0 {
		return version{}
	}
	return h[len(h)-1]
}

// set appends v to key's history.
func (k *keyspace) set(key string, v version) {
	if _, ok := k.hist[key]; !ok {
		i, _ := slices.BinarySearch(k.keys, key)
		k.keys = slices.Insert(k.keys, i, key)
	}
	k.hist[key] = append(k.hist[key], v)
}

// span returns the keys in [key, end) in order, as etcd reads a range:
// end empty means key alone, end "\x00" means every key from key on.
func (k *keyspace) span(key, end []byte) []string {
	if len(end) == 0 {
		if _, ok := k.hist[string(key)]; ok {
			return []string{string(key)}
		}
		return nil
	}
	lo, _ := slices.BinarySearch(k.keys, string(key))
	hi := len(k.keys)
	if !(len(end) == 1 && end[0] == 0) {
		hi, _ = slices.BinarySearch(k.keys, string(end))
	}
	if hi < lo {
		return nil
	}
	return k.keys[lo:hi]
}

// inRange says whether key falls in the range of key/end as span reads it.
func inRange(key string, start, end []byte) bool {
	if len(end) == 0 {
		return key == string(start)
	}
	if key < string(start) {
		return false
	}
	return (len(end) == 1 && end[0] == 0) || key < string(end)
}

// compact forgets every version a read at rev or later cannot see.
func (k *keyspace) compact(rev int64) {
	keep := k.keys[:0]
	for _, key := range k.keys {
		h := k.hist[key]
		i := sort.Search(len(h), func(i int) bool { return h[i].rev > rev })
		if i > 0 {
			if h[i-1].ver == 0 {
				h = h[i:]
			} else {
				h = h[i-1:]
			}
		}
		if len(h) == 0 {
			delete(k.hist, key)
			continue
		}
		k.hist[key] = slices.Clip(h)
		keep = append(keep, key)
	}
	k.keys = keep
}

func (v version) pb(key string, keysOnly bool) *mvccpb.KeyValue {
	kv := &mvccpb.KeyValue{Key: []byte(key), CreateRevision: v.create, ModRevision: v.rev, Version: v.ver, Lease: v.lease}
	if !keysOnly {
		kv.Value = bytes.Clone(v.value)
	}
	return kv
}

// kvClient serves the etcd key-value RPCs; clientv3's KV turns its
// answers and errors into what a client of a real etcd gets.
type kvClient struct{ s *Server }

var _ pb.KVClient = kvClient{}

func (c kvClient) Range(ctx context.Context, r *pb.RangeRequest, _ ...grpc.CallOption) (*pb.RangeResponse, error) {
	return do(ctx, c.s, func(t *txn) (*pb.RangeResponse, error) { return t.rangeKeys(r) })
}

func (c kvClient) RangeStream(context.Context, *pb.RangeRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[pb.RangeStreamResponse], error) {
	return nil, status.Error(codes.Unimplemented, "memetcd: range streams are not implemented")
}

func (c kvClient) Put(ctx context.Context, r *pb.PutRequest, _ ...grpc.CallOption) (*pb.PutResponse, error) {
	return do(ctx, c.s, func(t *txn) (*pb.PutResponse, error) { return t.put(r) })
}

func (c kvClient) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest, _ ...grpc.CallOption) (*pb.DeleteRangeResponse, error) {
	return do(ctx, c.s, func(t *txn) (*pb.DeleteRangeResponse, error) { return t.deleteRange(r), nil })
}

func (c kvClient) Txn(ctx context.Context, r *pb.TxnRequest, _ ...grpc.CallOption) (*pb.TxnResponse, error) {
	return do(ctx, c.s, func(t *txn) (*pb.TxnResponse, error) { return t.txn(r) })
}

func (c kvClient) Compact(ctx context.Context, r *pb.CompactionRequest, _ ...grpc.CallOption) (*pb.CompactionResponse, error) {
	return do(ctx, c.s, func(t *txn) (*pb.CompactionResponse, error) { return t.compact(r.Revision) })
}

// txn is one request being applied: its writes get revision rev, and are
// made current only if the request succeeds and wrote something.
type txn struct {
	s      *Server
	rev    int64
	wrote  bool
	events []event
}

// do applies one request under the server's lock.
func do[R any](ctx context.Context, s *Server, f func(*txn) (R, error)) (R, error) {
	var zero R
	if err := ctx.Err(); err != nil {
		return zero, status.FromContextError(err).Err()
	}
	s.expire()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return zero, status.Error(codes.Unavailable, ErrClosed.Error())
	}
	t := &txn{s: s, rev: s.rev + 1}
	r, err := f(t)
	if err != nil {
		t.undo()
		return zero, err
	}
	t.commit()
	return r, nil
}

// header is the response header: the revision after the request.
func (t *txn) header() *pb.ResponseHeader {
	rev := t.s.rev
	if t.wrote {
		rev = t.rev
	}
	return t.s.headerAt(rev)
}

func (t *txn) commit() {
	if !t.wrote {
		return
	}
	t.s.log = append(t.s.log, t.events...)
	t.s.bumpLocked(t.rev)
}

// undo drops the versions written at t.rev (a failed request).
func (t *txn) undo() {
	k := &t.s.kv
	for _, e := range slices.Backward(t.events) {
		h := k.hist[e.key]
		k.hist[e.key] = h[:len(h)-1]
		if e.prev.ver == 0 && len(h) == 1 {
			delete(k.hist, e.key)
			i, _ := slices.BinarySearch(k.keys, e.key)
			k.keys = slices.Delete(k.keys, i, i+1)
		}
		t.s.detachLocked(e.cur.lease, e.key)
		t.s.attachLocked(e.prev.lease, e.key)
	}
	t.events, t.wrote = nil, false
}

func (t *txn) rangeKeys(r *pb.RangeRequest) (*pb.RangeResponse, error) {
	rev := r.Revision
	switch {
	case rev <= 0:
		rev = t.s.rev
		if t.wrote {
			rev = t.rev
		}
	case rev > t.s.rev:
		return nil, rpctypes.ErrGRPCFutureRev
	case rev < t.s.compacted:
		return nil, rpctypes.ErrGRPCCompacted
	}
	var kvs []*mvccpb.KeyValue
	for _, key := range t.s.kv.span(r.Key, r.RangeEnd) {
		v := t.s.kv.at(key, rev)
		if v.ver == 0 || !keep(v, r) {
			continue
		}
		kvs = append(kvs, v.pb(key, r.KeysOnly))
	}
	resp := &pb.RangeResponse{Header: t.header(), Count: int64(len(kvs))}
	if r.CountOnly {
		return resp, nil
	}
	sortKVs(kvs, r.SortTarget, r.SortOrder)
	if r.Limit > 0 && int64(len(kvs)) > r.Limit {
		kvs, resp.More = kvs[:r.Limit], true
	}
	resp.Kvs = kvs
	return resp, nil
}

// keep applies a range's revision filters.
func keep(v version, r *pb.RangeRequest) bool {
	return (r.MinModRevision == 0 || v.rev >= r.MinModRevision) &&
		(r.MaxModRevision == 0 || v.rev <= r.MaxModRevision) &&
		(r.MinCreateRevision == 0 || v.create >= r.MinCreateRevision) &&
		(r.MaxCreateRevision == 0 || v.create <= r.MaxCreateRevision)
}

func sortKVs(kvs []*mvccpb.KeyValue, target pb.RangeRequest_SortTarget, order pb.RangeRequest_SortOrder) {
	if order == pb.RangeRequest_NONE {
		return
	}
	cmp := func(a, b *mvccpb.KeyValue) int {
		switch target {
		case pb.RangeRequest_VERSION:
			return compareInt(a.Version, b.Version)
		case pb.RangeRequest_CREATE:
			return compareInt(a.CreateRevision, b.CreateRevision)
		case pb.RangeRequest_MOD:
			return compareInt(a.ModRevision, b.ModRevision)
		case pb.RangeRequest_VALUE:
			return bytes.Compare(a.Value, b.Value)
		}
		return bytes.Compare(a.Key, b.Key)
	}
	slices.SortStableFunc(kvs, func(a, b *mvccpb.KeyValue) int {
		if order == pb.RangeRequest_DESCEND {
			return cmp(b, a)
		}
		return cmp(a, b)
	})
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (t *txn) put(r *pb.PutRequest) (*pb.PutResponse, error) {
	key := string(r.Key)
	if key == "" {
		return nil, rpctypes.ErrGRPCEmptyKey
	}
	prev := t.s.kv.latest(key)
	v := version{rev: t.rev, create: t.rev, ver: 1, lease: r.Lease, value: bytes.Clone(r.Value)}
	if r.IgnoreValue || r.IgnoreLease {
		if prev.ver == 0 {
			return nil, rpctypes.ErrGRPCKeyNotFound
		}
		if r.IgnoreValue {
			if len(r.Value) != 0 {
				return nil, rpctypes.ErrGRPCValueProvided
			}
			v.value = prev.value
		}
		if r.IgnoreLease {
			if r.Lease != 0 {
				return nil, rpctypes.ErrGRPCLeaseProvided
			}
			v.lease = prev.lease
		}
	}
	if v.lease != 0 && t.s.leases[v.lease] == nil {
		return nil, rpctypes.ErrGRPCLeaseNotFound
	}
	if prev.ver != 0 {
		v.create, v.ver = prev.create, prev.ver+1
	}
	t.write(key, prev, v, false)
	resp := &pb.PutResponse{Header: t.header()}
	if r.PrevKv && prev.ver != 0 {
		resp.PrevKv = prev.pb(key, false)
	}
	return resp, nil
}

// write records v as key's new version, moving its lease binding.
func (t *txn) write(key string, prev, v version, del bool) {
	t.s.kv.set(key, v)
	t.s.detachLocked(prev.lease, key)
	t.s.attachLocked(v.lease, key)
	t.events = append(t.events, event{rev: t.rev, del: del, key: key, cur: v, prev: prev})
	t.wrote = true
}

func (t *txn) deleteRange(r *pb.DeleteRangeRequest) *pb.DeleteRangeResponse {
	resp := &pb.DeleteRangeResponse{}
	for _, key := range slices.Clone(t.s.kv.span(r.Key, r.RangeEnd)) {
		prev := t.s.kv.latest(key)
		if prev.ver == 0 {
			continue
		}
		t.write(key, prev, version{rev: t.rev}, true)
		resp.Deleted++
		if r.PrevKv {
			resp.PrevKvs = append(resp.PrevKvs, prev.pb(key, false))
		}
	}
	resp.Header = t.header()
	return resp
}

func (t *txn) txn(r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if len(r.Success) > MaxTxnOps || len(r.Failure) > MaxTxnOps {
		return nil, rpctypes.ErrGRPCTooManyOps
	}
	if err := checkOps(r.Success); err != nil {
		return nil, err
	}
	if err := checkOps(r.Failure); err != nil {
		return nil, err
	}
	ok := true
	for _, c := range r.Compare {
		if !t.compare(c) {
			ok = false
			break
		}
	}
	ops := r.Success
	if !ok {
		ops = r.Failure
	}
	resp := &pb.TxnResponse{Succeeded: ok}
	for _, op := range ops {
		out, err := t.op(op)
		if err != nil {
			return nil, err
		}
		resp.Responses = append(resp.Responses, out)
	}
	resp.Header = t.header()
	return resp, nil
}

// checkOps refuses a branch that writes one key twice, as etcd does.
func checkOps(ops []*pb.RequestOp) error {
	puts := map[string]bool{}
	var dels []*pb.DeleteRangeRequest
	for _, op := range ops {
		switch r := op.Request.(type) {
		case *pb.RequestOp_RequestPut:
			if puts[string(r.RequestPut.Key)] {
				return rpctypes.ErrGRPCDuplicateKey
			}
			puts[string(r.RequestPut.Key)] = true
		case *pb.RequestOp_RequestDeleteRange:
			dels = append(dels, r.RequestDeleteRange)
		case *pb.RequestOp_RequestTxn:
			if err := checkOps(r.RequestTxn.Success); err != nil {
				return err
			}
			if err := checkOps(r.RequestTxn.Failure); err != nil {
				return err
			}
		}
	}
	for key := range puts {
		for _, d := range dels {
			if inRange(key, d.Key, d.RangeEnd) {
				return rpctypes.ErrGRPCDuplicateKey
			}
		}
	}
	return nil
}

func (t *txn) op(op *pb.RequestOp) (*pb.ResponseOp, error) {
	switch r := op.Request.(type) {
	case *pb.RequestOp_RequestRange:
		resp, err := t.rangeKeys(r.RequestRange)
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: resp}}, err
	case *pb.RequestOp_RequestPut:
		resp, err := t.put(r.RequestPut)
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: resp}}, err
	case *pb.RequestOp_RequestDeleteRange:
		resp := t.deleteRange(r.RequestDeleteRange)
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: resp}}, nil
	case *pb.RequestOp_RequestTxn:
		resp, err := t.txn(r.RequestTxn)
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: resp}}, err
	}
	return nil, status.Error(codes.InvalidArgument, "memetcd: empty request in a transaction")
}

// compare evaluates one compare against the current keys: a range
// compare holds when it holds for every key in the range, and for a
// missing key it compares the zero values (never for a value compare).
func (t *txn) compare(c *pb.Compare) bool {
	keys := t.s.kv.span(c.Key, c.RangeEnd)
	found := false
	for _, key := range keys {
		v := t.s.kv.latest(key)
		if v.ver == 0 {
			continue
		}
		found = true
		if !compareOne(c, v) {
			return false
		}
	}
	if found {
		return true
	}
	if c.Target == pb.Compare_VALUE {
		return false
	}
	return compareOne(c, version{})
}

func compareOne(c *pb.Compare, v version) bool {
	var r int
	switch c.Target {
	case pb.Compare_VERSION:
		r = compareInt(v.ver, c.GetVersion())
	case pb.Compare_CREATE:
		r = compareInt(v.create, c.GetCreateRevision())
	case pb.Compare_MOD:
		r = compareInt(v.rev, c.GetModRevision())
	case pb.Compare_VALUE:
		r = bytes.Compare(v.value, c.GetValue())
	case pb.Compare_LEASE:
		r = compareInt(v.lease, c.GetLease())
	}
	switch c.Result {
	case pb.Compare_EQUAL:
		return r == 0
	case pb.Compare_GREATER:
		return r > 0
	case pb.Compare_LESS:
		return r < 0
	case pb.Compare_NOT_EQUAL:
		return r != 0
	}
	return false
}

func (t *txn) compact(rev int64) (*pb.CompactionResponse, error) {
	s := t.s
	if rev <= s.compacted {
		return nil, rpctypes.ErrGRPCCompacted
	}
	if rev > s.rev {
		return nil, rpctypes.ErrGRPCFutureRev
	}
	s.compacted = rev
	s.kv.compact(rev)
	i := sort.Search(len(s.log), func(i int) bool { return s.log[i].rev >= rev })
	s.log = slices.Clone(s.log[i:])
	return &pb.CompactionResponse{Header: t.header()}, nil
}
