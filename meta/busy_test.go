package meta

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// busyMessage acquires vol with o and returns the refusal, which must be a
// BusyError of class ErrBusy.
func busyMessage(t *testing.T, s *Store, o OwnerOptions) string {
	t.Helper()
	ow, err := s.Acquire(testCtx(t), "vol", o)
	if err == nil {
		ow.Release(testCtx(t))
		t.Fatalf("%+v: acquired a busy volume", o)
	}
	var busy *BusyError
	if !errors.As(err, &busy) || !errors.Is(err, ErrBusy) {
		t.Fatalf("%+v: want a BusyError, got %v", o, err)
	}
	return err.Error()
}

// TestBusyErrorSaysWhoAndWhatToDo: a refused map names the holder, its
// host and process, since when it holds the volume, when its lease lapses,
// the rule for --read-only and how to take the volume over.
func TestBusyErrorSaysWhoAndWhatToDo(t *testing.T) {
	s := setup(t, 3, 1, 4)
	addVolume(t, s, "vol", 2, 1, 2)
	ctx := testCtx(t)
	before := time.Now().UTC().Truncate(time.Second)
	rw := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "map.vm", TTL: 10 * time.Second})
	host, _ := os.Hostname()
	who := fmt.Sprintf("volume vol is mapped rw by map.vm (host %s, pid %d, since ", host, os.Getpid())
	takeover := []string{"to take it over: run `nvstripe unmap vol` on host " + host,
		"if the holder died, map again once the holder's lease lapses (at most ", "There is no forced takeover"}
	for _, ro := range []bool{false, true} {
		msg := busyMessage(t, s, OwnerOptions{Holder: "node-b", ReadOnly: ro})
		want(t, msg, append(takeover, who, fmt.Sprintf("epoch %d, its lease (10s) lapses in ", rw.Epoch()),
			"in use", "not mapped again anywhere, not even with --read-only")...)
		since := msg[strings.Index(msg, "since ")+6:]
		at, err := time.Parse(time.RFC3339, since[:strings.IndexByte(since, ',')])
		if err != nil || at.Before(before) || at.After(time.Now()) {
			t.Errorf("since %v (%v), want the time of the claim", at, err)
		}
	}
	if err := rw.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ro := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "reader", ReadOnly: true})
	want(t, busyMessage(t, s, OwnerOptions{Holder: "node-b"}), "mapped ro by reader (host ",
		"a read-write map waits until every read-only map has unmapped; --read-only maps it beside them")
	if err := ro.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestBusyErrorOldOwnerRecord: an owner recorded without host, process and
// time (as before they were kept) still decodes, and the refusal says what
// it knows.
func TestBusyErrorOldOwnerRecord(t *testing.T) {
	s := setup(t, 3, 1, 4)
	addVolume(t, s, "vol", 2, 1, 2)
	ctx := testCtx(t)
	lease, err := s.cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.cli.Put(ctx, s.keys.ownerRW("vol"), `{"v":1,"holder":"old-node","mode":"rw"}`, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	msg := busyMessage(t, s, OwnerOptions{Holder: "node-b"})
	want(t, msg, "volume vol is mapped rw by old-node (epoch ", "its lease (30s) lapses in ", "run `nvstripe unmap vol` on old-node")
	owners, err := s.Owners(ctx, "vol")
	if err != nil || len(owners) != 1 || owners[0].Holder != "old-node" || owners[0].PID != 0 || !owners[0].Since.IsZero() {
		t.Errorf("owners %+v, %v", owners, err)
	}
}
