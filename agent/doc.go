// Package agent is the node daemon of nvstripe (`nvstripe agent`): it opens
// volumes with package volclient (ownership lease, placement and namespaces
// from etcd, the erasure-coded engine on top) and serves them over NBD or
// FUSE, keeps its mappings across restarts, reports namespace errors to etcd
// and exports metrics.
//
// # The node daemon
//
// Agent (and Serve, which adds the gRPC API of package agent/api on a unix
// socket and Prometheus metrics over HTTP) is `nvstripe agent`. It maps
// volumes on request (Map: an NBD listener, a kernel /dev/nbdN, or a FUSE
// file), unmaps them (Unmap: stop serving, flush, mark clean, release the
// lease, unmount, close the listener) and lists them (List). Each mapping
// holds its volume's ownership lease (meta.Owner), runs the shard moves the
// controller addresses to it (Mapped.ServeTasks), and marks idle segments
// clean every CleanInterval. Mappings are recorded in a badger database in
// StateDir; a restarted agent restores them, retrying in the background (state
// "retrying") while a volume cannot be opened — for instance while the lease
// of the crashed previous agent has not expired yet. Each mapping applies
// its volume's QoS limits (qos.go) and follows changes of them.
//
// # Kernel devices across restarts, resize, detach
//
// A kernel device outlives an agent killed -9: the nbd driver holds IO for
// AttachOptions.DeadConnTimeout, and the restored mapping (its record names
// /dev/nbdN) takes the device's dead connections over with fresh sockets
// (NBD_CMD_RECONFIGURE); requests that were in flight when the agent died
// are sent again only when the kernel's request timeout
// (nbd.DefaultKernelTimeout, 2 minutes) runs out, so they wait that long
// even once the device is taken over. An agent with a StateDir adds ublk
// devices with user recovery and takes /dev/ublkbN back (ublk.Recover). A
// mounted file system sees IO pause, not fail. (A clean stop of the agent, Close,
// disconnects its devices.) Every two seconds a mapping reads its volume's
// record: a grown volume grows the served device and the frontend is told
// (a kernel nbd device gets its new capacity; NBD clients and FUSE read the
// size anew; a ublk device on Linux before 6.16 keeps its size). A kernel
// device disconnected by someone else (nbd-client -d) shows health
// "detached" in List; a foreground map (ServeForeground) then ends with
// ErrDetached. A foreground map registers itself on MapSocket(ListDir,
// volume): that socket is the mapping's runtime record, serving List, Status
// and Unmap (the process flushes, detaches and releases the lease, then
// answers and exits). ListMappings reads the records with the agent's socket
// for `nvstripe ls`, and Unmap finds there who serves a volume or device;
// both remove records whose process died (nobody listens on them).
//
// # etcd unreachable, lease lost
//
// The lease is renewed every TTL/3 by the etcd client. While etcd cannot be
// reached the client keeps retrying and meta.Owner's context stays alive; it
// is cancelled only when a renewal has not been answered for the whole TTL
// (the client checks that deadline, receipt of the last renewal + TTL, once a
// second) or when the owner key is deleted. So the agent keeps serving reads
// and writes for up to the TTL (volclient.OpenOptions.LeaseTTL, default
// 10s) of outage: segments already marked dirty and cached placement need no etcd;
// the first write to a clean segment, and a new segment, wait for etcd. When
// the lease is lost the volume is fenced: the volume closes
// (volclient.OpenVolume) and the mapping's device, a blockdev.Fence inside a
// blockdev.Meter, fails every call with blockdev.ErrFenced (EPERM over NBD
// and FUSE); List shows "fenced" until the mapping is unmapped. The same
// happens when the storage refuses this owner because a newer one claimed
// the volume's namespaces (volclient package doc, "Fencing"): writes that
// were queued while this node was paused past its lease are refused by the
// targets, not only by this timer.
//
// # Errors reported
//
// Volume events are counted per volume and per namespace (List, metrics).
// Media errors (Corruption events: a namespace answered with unreadable
// data) mark the namespace failed in etcd (meta.Store.SetNamespaceState)
// after ReportOptions.FailNamespaceAfter of them, so the controller rebuilds
// its shards; unreachable namespaces are left to membership and the
// controller's grace period. Checksum mismatches count as one media error
// from the eighth of a namespace on; blocks a resync kept as torn writes,
// and blocks left bad in a segment whose resync after an unclean stop is
// still pending (volume.ChecksumInfo.Unsettled), never do. Degraded IO is
// only counted: meta has no record for per-node health reports.
//
// # Namespaces that come back
//
// Every mapping probes the namespaces its volume treats as down and uses
// again those that answer (see volclient); a read-write owner rebuilds in
// place the slots they missed.
//
// Concurrency: an Agent is safe for concurrent use; Close is idempotent.
package agent
