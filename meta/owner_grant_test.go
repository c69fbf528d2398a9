package meta

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestAcquireGrantsAgainWhenTheLeaseExpiredBeforeTheClaim: a process too
// loaded to send its claim within the lease's TTL (here: a first lease of
// one second, used after it expired) gets a fresh lease and the volume,
// not etcd's "requested lease not found".
func TestAcquireGrantsAgainWhenTheLeaseExpiredBeforeTheClaim(t *testing.T) {
	s := setup(t, 3, 1, 8)
	ctx := testCtx(t)
	if _, err := s.CreateVolume(ctx, VolumeSpec{Name: "v", Size: testSlot, Layout: Layout{K: 2, M: 1, Chunk: 4096}}); err != nil {
		t.Fatal(err)
	}
	grants := 0
	s.grantLease = func(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
		grants++
		if grants > 1 {
			return s.cli.Grant(ctx, ttl)
		}
		resp, err := s.cli.Grant(ctx, 1)
		if err != nil {
			return nil, err
		}
		for { // until etcd has expired it
			ttl, err := s.cli.TimeToLive(ctx, resp.ID)
			if err != nil {
				return nil, err
			}
			if ttl.TTL == -1 { // revoked by etcd
				return resp, nil
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	o, err := s.Acquire(ctx, "v", OwnerOptions{Holder: "n1"})
	if err != nil {
		t.Fatalf("acquire after an expired first lease: %v", err)
	}
	defer o.Release(ctx)
	if grants != 2 || o.Valid() != nil {
		t.Fatalf("%d grants, valid %v: want a second lease and the volume held", grants, o.Valid())
	}
}
