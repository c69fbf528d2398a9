// Package volclient opens an erasure-coded volume over its namespaces the way
// every client of a volume does (the node daemon in package agent, the
// controller's mover, the demo): it reads the volume record and its
// placement from etcd (package meta), takes the volume's ownership lease,
// connects one NVMe/TCP initiator per namespace over all its paths (package
// nvmeof/initiator), checks each namespace's label before using it, and puts
// the erasure-coded engine (package volume) on top. It also moves shards
// (MoveShard, Rebuild) and runs the shard-move tasks the controller
// addresses to a volume's owner (Mapped.ServeTasks), is the controller's
// Mover for volumes nobody maps (TaskMover), and adds namespaces to the
// cluster, labelling them (AddNamespace, Discover: `nvstripe ns add` and
// `ns discover`).
//
// # Opening
//
// OpenVolume takes the lease (meta.Owner; shared for ReadOnly), settles
// shard moves a crash left half done (ResumeMoves) and resyncs segments a
// previous owner left dirty (volume.Recover). Namespaces are connected on
// first use (Namespaces, the volume's DeviceSet): one that cannot be
// reached is used as missing (IO to it fails as blockdev.ErrUnavailable, so
// the volume works degraded) until a probe connects it; one that answers
// without its label (blank, garbage, another cluster's or namespace's) is
// used as missing too, never written to, logged and marked failed in etcd
// (its data is not the volume's: the controller rebuilds its shards
// elsewhere).
//
// # Fencing
//
// A read-write owner is a Session on the storage: its connections send a
// host ID made of the volume's tag and its epoch, and it registers the
// epoch as its NVMe reservation key (the host NQN stays the node's). Before
// the first write OpenVolume claims every namespace the volume has a slot
// or a move target on, in parallel: the claim holds a write-exclusive
// all-registrants reservation and preempts-and-aborts the volume's older
// sessions, so the targets refuse a stale owner even if it was paused past
// its lease and resumes with writes queued. Namespaces connected later (a
// probe, a new segment or move target) are claimed as they connect. If the
// storage says a newer owner exists (a claim or a write fails with
// blockdev.ErrFenced), the ownership ends at once (meta.Owner.Lose).
// Read-only mappings never register: readers are never fenced. A clean
// Close keeps the registration (the next owner preempts it): unregistering
// the last registrant would end the reservation and let an earlier fenced
// owner write again. Namespaces without reservations are used with a
// warning; placement keeps shards off them unless the operator allowed them
// (AddNamespace, meta.NamespaceRecord.AllowUnfenced).
//
// # Ownership lost
//
// The lease is renewed in the background (meta.Owner); while etcd cannot be
// reached the volume keeps serving for up to the TTL less a margin from the
// sending of the last answered renewal (OpenOptions.LeaseTTL, default 10s;
// meta.Owner.Valid). Every namespace of the volume sits behind a fence over
// the lease (blockdev.NewLeaseFence): from that deadline on every IO fails
// with blockdev.ErrFenced, and so does every read that completes after it,
// whenever it was issued (a process paused with reads queued must not
// return bytes of a slot released and reused meanwhile; reads are not
// fenced on the storage). When the lease is lost, or the storage fences
// the session, Mapped closes the volume at once, so that a stale owner
// never writes; fencing what is served on top is the caller's (the agent
// wraps its devices in blockdev.Fence).
//
// # Namespaces that come back
//
// Every OpenOptions.RecheckInterval the namespaces the volume treats as down
// are probed. One that answers with its label is used again
// (volume.Reinstate: trusted only for what it had flushed before going
// down); a read-write owner then rebuilds in place the slots it missed
// (volume.Repair). A read-only mapping repairs nothing.
//
// # Shard moves
//
// A move is crash-safe: recorded in etcd (BeginMove) before any data moves,
// committed only when the new slot is complete and flushed (CommitMove), the
// old slot released last (FinishMove); ResumeMoves settles a move a crash
// interrupted at any step.
//
// # Read-only mappings
//
// A read-only mapping never writes (volume.Options.ReadOnly) and follows
// the moves of the controller's mover, which may take the volume beside its
// readers (OpenOptions.Mover, TaskMover): the follower keeps the segment map
// from a list and a watch, switches a segment's slots when a move commits
// (volume.Volume.Follow) and publishes the revision it applied
// (meta.Owner.SetApplied). The mover releases the old slot only once every
// reader has applied the commit or lost its lease (FinishMoveFollowed;
// meta/follow.go has the protocol); a reader that lost its lease fails
// every read it completes from then on (the lease fence above), so it never
// reads a released slot.
//
// Concurrency: Mapped, Namespaces and TaskMover are safe for concurrent use;
// Mapped.Close is idempotent.
package volclient
