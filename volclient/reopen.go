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
// epoch it gives the ownership back and fails with ErrTakenOver; when etcd
// no longer has that history, with meta.ErrCompacted. Other errors (etcd
// still away, the volume owned right now) may pass: call it again later.
func Reopen(ctx context.Context, store *meta.Store, m *Mapped, o OpenOptions) (*Mapped, error) {
	name, lost := m.Record.Name, m.Owner.Epoch()
	_ = m.Close(ctx) // the lease is gone or going: nothing of it to keep
	n, err := OpenVolume(ctx, store, name, o)
	if err != nil {
		return nil, stillOurs(name, lost, err)
	}
	// The history between the two epochs is fixed now: check it after
	// acquiring, so no owner can slip in between the check and the claim.
	owners, err := store.OwnersSince(ctx, name, lost)
	if err == nil {
		for _, ow := range owners {
			if ow.Mode == meta.ModeRW && ow.Epoch < n.Owner.Epoch() {
				err = fmt.Errorf("volume %s was mapped read-write by %s (epoch %d) after this mapping lost epoch %d: %w",
					name, ow.Holder, ow.Epoch, lost, ErrTakenOver)
				break
			}
		}
	} else {
		err = fmt.Errorf("volume %s: who owned it since epoch %d: %w", name, lost, err)
	}
	if err != nil {
		return nil, errors.Join(err, n.Close(context.WithoutCancel(ctx)))
	}
	return n, nil
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
