package volclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/nvstripe/nvstripe/meta"
)

// ErrTakenOver: another owner mapped the volume read-write while this
// mapping had lost its ownership, so the mapping may not take it back (its
// clients may hold data that owner changed).
var ErrTakenOver = errors.New("taken over by another owner")

// Reopen takes the volume of m again after m lost its ownership (its lease
// ran out while etcd could not be reached): it closes m and opens the volume
// anew through OpenVolume with o, so the mapping gets a new epoch and
// everything OpenVolume does on the way (resync, reservations). When a
// read-write owner other than the new one acquired the volume since m's
// epoch it gives the ownership back and fails with ErrTakenOver (see
// takenOver: with meta.ErrCompacted when nobody can tell). Other errors
// (etcd still away, the volume owned right now) may pass: call it again.
func Reopen(ctx context.Context, store *meta.Store, m *Mapped, o OpenOptions) (*Mapped, error) {
	name, lost := m.Record.Name, m.Owner.Epoch()
	_ = m.Close(ctx) // the lease is gone or going: nothing of it to keep
	n, err := OpenVolume(ctx, store, name, o)
	if err != nil {
		return nil, stillOurs(name, lost, err)
	}
	if err := takenOver(ctx, store, n, lost); err != nil {
		return nil, errors.Join(err, n.Close(context.WithoutCancel(ctx)))
	}
	return n, nil
}

// takenOver fails with ErrTakenOver when a read-write owner other than n
// acquired the volume after epoch lost. It asks n's own claim, which read
// the last read-write owner in the same transaction (so no owner can slip
// in between the check and the claim); only for a volume with no such
// record does it read etcd's history (meta.OwnersSince, which etcd
// compacts: then it fails with meta.ErrCompacted).
func takenOver(ctx context.Context, store *meta.Store, n *Mapped, lost int64) error {
	name := n.Record.Name
	owners := []meta.OwnerInfo{n.Owner.LastRW()}
	if owners[0].Epoch == 0 {
		var err error
		if owners, err = store.OwnersSince(ctx, name, lost); err != nil {
			return fmt.Errorf("volume %s: who owned it since epoch %d: %w", name, lost, err)
		}
	}
	for _, ow := range owners {
		if ow.Mode == meta.ModeRW && ow.Epoch > lost && ow.Epoch < n.Owner.Epoch() {
			return fmt.Errorf("volume %s was mapped read-write by %s (epoch %d) after this mapping lost epoch %d: %w",
				name, ow.Holder, ow.Epoch, lost, ErrTakenOver)
		}
	}
	return nil
}

// stillOurs turns a refusal because the volume is owned into a passing
// error when the lost epoch itself was in the way: etcd keeps a lease it
// could not expire during an outage for up to its TTL after it answers
// again. The refusal itself says who was in the way: the lease may be gone
// by the time anyone looks again, and etcd's owners then say nothing of it.
func stillOurs(name string, lost int64, err error) error {
	var busy *meta.BusyError
	if errors.As(err, &busy) && busy.Has(lost) {
		return fmt.Errorf("volume %s: the lease of lost epoch %d is still in etcd (it expires within its TTL)", name, lost)
	}
	return err
}
