package meta

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// BusyError is Acquire's ErrBusy: the owners of the volume that were in
// the way, as etcd had them when it refused the claim. Its message says
// who holds the volume (holder, host, process, since when), when the
// holder's lease lapses if it stops renewing it, which claims share the
// volume, and how to take it over safely.
type BusyError struct {
	Volume string
	Owners []OwnerInfo // at least one
	// Mode and Mover are the refused claim's (ModeRW or ModeRO).
	Mode  string
	Mover bool
}

func (e *BusyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "volume %s is mapped %s: %v", e.Volume, e.holders(), ErrBusy)
	fmt.Fprintf(&b, "; %s", e.rule())
	fmt.Fprintf(&b, "; to take it over: %s", e.takeover())
	return b.String()
}

func (e *BusyError) Unwrap() error { return ErrBusy }

// Has says whether the owner of epoch was among those in the way.
func (e *BusyError) Has(epoch int64) bool {
	for _, o := range e.Owners {
		if o.Epoch == epoch {
			return true
		}
	}
	return false
}

// holders describes the owners in the way.
func (e *BusyError) holders() string {
	var parts []string
	for _, o := range e.Owners {
		parts = append(parts, o.describe())
	}
	return strings.Join(parts, " and ")
}

// describe says who an owner is: "rw by map.vm (host vm, pid 412, since
// 2026-12-06T06:01:02Z, epoch 31, lease lapses 8s after its last renewal)".
func (o OwnerInfo) describe() string {
	what := []string{}
	if o.Host != "" {
		what = append(what, "host "+o.Host)
	}
	if o.PID != 0 {
		what = append(what, fmt.Sprintf("pid %d", o.PID))
	}
	if !o.Since.IsZero() {
		what = append(what, "since "+o.Since.UTC().Format(time.RFC3339))
	}
	what = append(what, fmt.Sprintf("epoch %d", o.Epoch))
	switch {
	case o.LeaseLeft == 0:
		what = append(what, "its lease has expired and etcd is removing it")
	case o.LeaseLeft > 0 && o.LeaseTTL > 0:
		what = append(what, fmt.Sprintf("its lease (%v) lapses in %v unless renewed", o.LeaseTTL, o.LeaseLeft))
	case o.LeaseLeft > 0:
		what = append(what, fmt.Sprintf("its lease lapses in %v unless renewed", o.LeaseLeft))
	}
	role := o.Mode
	if o.Mover {
		role = "rw (the controller moving its shards)"
	}
	return fmt.Sprintf("%s by %s (%s)", role, o.Holder, strings.Join(what, ", "))
}

// rule states which claims share a volume, for the refused one.
func (e *BusyError) rule() string {
	rw, readers, mover := false, false, false
	for _, o := range e.Owners {
		switch {
		case o.Mover:
			mover = true
		case o.Mode == ModeRW:
			rw = true
		default:
			readers = true
		}
	}
	switch {
	case rw:
		return "a volume mapped read-write is not mapped again anywhere, not even with --read-only " +
			"(read-only maps share a volume only with other read-only maps and the controller's moves)"
	case readers && e.Mode == ModeRW && !e.Mover:
		return "a read-write map waits until every read-only map has unmapped; --read-only maps it beside them"
	case mover:
		return "the controller is moving the volume's shards; a read-write map can take it once that move ends " +
			"(retry in a few seconds), and --read-only maps it now"
	}
	return "read-only maps share a volume only with other read-only maps and the controller's moves"
}

// takeover says how to take the volume over safely.
func (e *BusyError) takeover() string {
	o := e.Owners[0]
	where := o.Holder
	if o.Host != "" {
		where = "host " + o.Host
	}
	wait := "once the holder's lease lapses"
	if left := e.longestLease(); left > 0 {
		wait = fmt.Sprintf("once the holder's lease lapses (at most %v from now)", left)
	}
	return fmt.Sprintf("run `nvstripe unmap %s` on %s; if the holder died, map again %s. There is no forced "+
		"takeover: ownership moves only by unmap or a lapsed lease, which with the NVMe reservations keyed "+
		"by epoch keeps a holder that still runs from writing after another took the volume", e.Volume, where, wait)
}

// longestLease is the longest LeaseLeft of the owners in the way (0 when
// none is known).
func (e *BusyError) longestLease() time.Duration {
	var d time.Duration
	for _, o := range e.Owners {
		d = max(d, o.LeaseLeft)
	}
	return d
}

// leasesLeft asks etcd how long each owner's lease in busy has left and
// returns busy. An owner whose lease etcd does not know (expired, about to
// be removed) gets LeaseLeft 0; one etcd did not answer for stays -1.
func (s *Store) leasesLeft(ctx context.Context, busy *BusyError) error {
	for i := range busy.Owners {
		o := &busy.Owners[i]
		if o.lease == clientv3.NoLease {
			continue
		}
		resp, err := s.cli.TimeToLive(ctx, o.lease)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			o.LeaseLeft = 0
			continue
		}
		if err != nil {
			continue // the refusal matters more than its details
		}
		o.LeaseTTL = time.Duration(resp.GrantedTTL) * time.Second
		o.LeaseLeft = max(time.Duration(resp.TTL)*time.Second, 0)
	}
	return busy
}
