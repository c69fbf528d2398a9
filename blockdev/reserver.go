package blockdev

import "context"

// Reserver is the optional capability of a device whose storage decides
// who may write it (NVMe reservations on an NVMe-oF namespace): the
// storage, not a timer on the client, refuses a stale owner.
//
// Keys name ownership sessions and must be unique across every session
// that may register on the same storage (an etcd revision, not a
// per-volume counter), because fencing removes every registrant of the
// stale key. Registrants may write; everyone else gets ErrFenced.
type Reserver interface {
	// TakeOver registers key for this device's identity, makes sure a
	// reservation admitting every registrant is held, and fences the
	// registrants of stale (0: none): when it returns nil the storage has
	// finished or aborted their in-flight commands and refuses their new
	// writes with ErrFenced.
	TakeOver(ctx context.Context, key, stale uint64) error
	// Leave removes this device's registration of key. It fails with
	// ErrFenced when the key was already fenced. When it removes the last
	// registrant the reservation ends and writers fenced earlier may write
	// again, so a clean unmap should keep its registration (the volume's
	// next owner fences it) and Leave is for retiring a volume or a
	// namespace.
	Leave(ctx context.Context, key uint64) error
}
