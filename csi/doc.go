// Package csi is the Kubernetes CSI driver of nvstripe (`nvstripe csi
// --endpoint unix://PATH --node-id ID [--agent SOCKET]`): the identity,
// controller and node services of the CSI spec (v1) over gRPC on a unix
// socket, one process serving all three.
//
// # Names deploy files use
//
// Command: nvstripe csi --endpoint unix://PATH --node-id ID [--agent SOCKET]
// [--mode all|controller|node] [--state-dir DIR], with the usual etcd
// flags, environment and config file. --mode controller (no agent, no
// node id needed) suits the controller Deployment, --mode node the node
// DaemonSet; the default serves both. --agent defaults to
// /run/nvstripe/agent.sock, --state-dir to /var/lib/nvstripe/csi (it holds
// FUSE mounts: give the DaemonSet that host directory with Bidirectional
// propagation).
//
// Driver name: nvstripe.io. StorageClass parameters (anything else is
// refused with InvalidArgument; keys starting csi.storage.k8s.io/ are the
// sidecars' and are ignored):
//
//	k              data shards per stripe (default 4)
//	m              parity shards per stripe (default 2)
//	checksums      "true" (default: crc32c on every 4 KiB block) or "false"
//	writeLog       "true" (default with checksums: partial-parity log) or "false"
//	failureDomain  the host label naming failure domains; it must be the
//	               cluster's (`nvstripe cluster init --domain-label`), "host"
//	               or empty when the cluster has none. Placement is the
//	               cluster's: the parameter only checks that the class and the
//	               cluster agree.
//	csi.storage.k8s.io/fstype  (read by the sidecars; the node sees it as
//	               the capability's fs type) ext4 (default) or xfs
//	qosIOPS, qosReadIOPS, qosWriteIOPS  request limits a second
//	qosBPS, qosReadBPS, qosWriteBPS     byte limits a second, e.g. 200MiB/s
//	qosBurst       how long a limit may be used at once after a pause
//	               (default 1s, at most 1m)
//
// The qos* values are parsed by the code of `nvstripe volume create|set
// --qos-*` (capacity.QoSFlags; "0" or absent: no limit). A bad one is
// InvalidArgument and creates nothing. The same qos* keys, and only they,
// are the mutable parameters of a VolumeAttributesClass: given at
// CreateVolume they override the StorageClass's, and ControllerModifyVolume
// applies them to a live volume (`volume set`; every mapping follows within
// about a second). Only the limits given change; a bad value changes
// nothing. A repeated CreateVolume does not compare QoS, which may have
// been modified since.
//
// NVMe/TCP TLS: the driver opens no NVMe/TCP connection (the controller
// works on etcd, the node maps through the agent), so the key goes to the
// agent (`nvstripe agent --tls-key-file`); `nvstripe csi --tls-key-file` is
// a usage error saying so.
//
// Topology key: topology.nvstripe.io/cluster, value the cluster's name. A
// volume's shards are spread over the cluster's failure domains and any node
// that reaches the cluster can attach it, so volumes and nodes carry that one
// segment.
//
// The controller advertises CREATE_DELETE_VOLUME, EXPAND_VOLUME,
// LIST_VOLUMES, GET_CAPACITY and MODIFY_VOLUME, and not PUBLISH_UNPUBLISH_VOLUME: the
// CSIDriver object sets attachRequired: false. Exclusive access does not
// depend on an attacher: a read-write stage takes the volume's ownership
// lease in etcd through the node's agent, and a second node's read-write
// stage is refused (FailedPrecondition) while the first holds it; the
// targets also refuse writes from an owner that lost the lease.
//
// # Controller
//
// CreateVolume creates a thin volume (capacity.CreateVolume, the path of
// `nvstripe volume create`, with its overcommit check) of the requested size
// rounded up to 4 KiB (1 GiB when no size is asked for). The volume id is the
// CSI name when it is a valid volume name (1-63 letters, digits, '.', '_',
// '-'), else "csi-" and 40 hex digits of the name's SHA-256. A second
// CreateVolume of a name returns the volume when its size fits the range and
// its layout matches the parameters, else AlreadyExists. DeleteVolume is
// `volume rm` (a mapped volume: FailedPrecondition; a missing one: success).
// ControllerExpandVolume is `volume resize`. GetCapacity is what `nvstripe
// df` shows as still promisable: (limit × usable − promised) of raw space
// times k/(k+m) of the class's layout. ListVolumes pages in name order; its
// token names the last volume of the previous page.
//
// # Node
//
// Access modes: SINGLE_NODE_WRITER (read-write mapping, ownership lease),
// SINGLE_NODE_READER_ONLY and MULTI_NODE_READER_ONLY (read-only mappings
// under the shared read-only lease; any number of nodes). Others are refused.
//
// NodeStageVolume asks the node's agent (agent/api over --agent) to map the
// volume as a block device, in this order: ublk where the driver is loaded
// (/dev/ublk-control), else a kernel nbd device where the nbd module is
// loaded, else the agent's FUSE file under STATE/fuse/VOLUME with a loop
// device over it (losetup --direct-io). The third way exists for machines
// without ublk and nbd (the project's build machines have neither); it is
// served by the same agent, but its loop device does not outlive the agent:
// a FUSE mount ends with its process (see Recover below). For Mount access
// it makes a filesystem only on a blank device of a read-write stage: blkid
// finds nothing and the first and last MiB read as zeros (a volume never
// written does; bytes blkid cannot name are still data). A read-only stage
// of a blank volume is FailedPrecondition, and a device holding data or
// another filesystem than the one asked for is never reformatted
// (FailedPrecondition). A repeated stage must find the same device on the
// staging path (AlreadyExists otherwise); a failed stage leaves nothing
// mapped. It mounts the device on the staging path
// (ro,noload for ext4 and ro,norecovery for xfs on read-only stages). For
// Block access it bind-mounts the device onto the file STAGING/block.
// NodePublishVolume bind-mounts the staged directory (or block file) onto the
// target, read-only when the request or the access mode says so (a block
// device refuses writes only under a read-only access mode, whose mapping
// and loop device are read-only: a read-only publish of a block volume with
// a writer mode is FailedPrecondition, as a read-only bind of a device node
// would not stop writes);
// NodeUnpublishVolume and NodeUnstageVolume undo it, detach the loop device
// and unmap the volume through the agent. NodeExpandVolume waits until the
// device shows the volume's new size (a loop device is told with losetup
// --set-capacity), then grows a mounted filesystem online (resize2fs,
// xfs_growfs).
//
// The plugin keeps no state of its own: the agent records its mappings and
// restores them after its own restart, and a restarted plugin finds a staged
// volume again from the agent's List (by volume id), /proc/self/mountinfo
// (by staging path) and the loop devices' backing files. A ublk or kernel
// nbd device outlives a restarted agent (the agent takes it back). A loop
// device over a FUSE file does not: when the node service starts (Recover)
// and at each NodeStageVolume it lazily unmounts the dead FUSE directory so
// that the restarted agent can serve the file again, attaches a new loop
// device and makes every mount of the dead one again in its place (the
// staging mount, then the publish binds, read-only where they were). What
// was flushed reads back; writes the old mount had not flushed are lost as
// on a crash, and files held open across the restart fail (EIO) until
// reopened. Every call is idempotent, and calls on one volume are
// serialised.
package csi
