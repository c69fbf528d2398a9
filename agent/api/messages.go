package api

import "time"

// MapRequest asks the agent to serve a volume. Exactly one of NBDListen,
// NBDDevice, Ublk and FUSEDir is set.
type MapRequest struct {
	// Volume is the volume name (also the NBD export and FUSE file name).
	Volume string `json:"volume"`
	// NBDListen serves the volume over NBD on this listener: "HOST:PORT"
	// (TCP) or "unix:/path" (a unix socket).
	NBDListen string `json:"nbd_listen,omitempty"`
	// NBDDevice attaches the volume to this kernel device, "/dev/nbdN".
	NBDDevice string `json:"nbd_device,omitempty"`
	// Ublk serves the volume as /dev/ublkbN through the kernel's ublk driver
	// (the driver picks N).
	Ublk bool `json:"ublk,omitempty"`
	// FUSEDir shows the volume as the file FUSEDir/Volume.
	FUSEDir string `json:"fuse_dir,omitempty"`
	// ReadOnly maps read-only under a shared read-only lease.
	ReadOnly bool `json:"read_only,omitempty"`
}

// MapReply describes the new mapping.
type MapReply struct {
	Mapping Mapping `json:"mapping"`
}

// UnmapRequest asks the agent to stop serving a volume and forget it.
type UnmapRequest struct {
	Volume string `json:"volume"`
}

// UnmapReply is empty.
type UnmapReply struct{}

// ListRequest asks for every mapping.
type ListRequest struct{}

// ListReply lists the mappings in volume-name order.
type ListReply struct {
	Mappings []Mapping `json:"mappings"`
}

// StatusRequest asks about the agent itself.
type StatusRequest struct{}

// StatusReply describes the agent.
type StatusReply struct {
	// Holder is the name the agent owns volumes under in etcd.
	Holder string `json:"holder"`
	// Etcd are the etcd endpoints the agent uses.
	Etcd []string `json:"etcd"`
	// StateDir holds the agent's badger database ("" when it keeps none).
	StateDir string `json:"state_dir,omitempty"`
	// Metrics is the Prometheus listener address ("" when off).
	Metrics string `json:"metrics,omitempty"`
	// Started is when the agent started.
	Started time.Time `json:"started"`
	// Mappings counts the mappings per state.
	Mappings map[string]int `json:"mappings"`
}

// Mapping states.
const (
	// StateStarting: being opened (lease, namespaces, resync) and served.
	StateStarting = "starting"
	// StateServing: the volume is served.
	StateServing = "serving"
	// StateRetrying: restoring after an agent restart failed; retried in the
	// background (Error says why).
	StateRetrying = "retrying"
	// StateFenced: the ownership lease was lost; IO fails (EPERM over NBD
	// and FUSE) until the volume is unmapped (and mapped again).
	StateFenced = "fenced"
)

// Mapping is one volume served by the agent.
type Mapping struct {
	Volume string `json:"volume"`
	// Via is "nbd-listen", "nbd-device" or "fuse".
	Via string `json:"via"`
	// Where is the listener address, device path or FUSE directory asked for.
	Where string `json:"where"`
	// URL is what clients use: nbd://HOST:PORT/NAME,
	// nbd+unix:///NAME?socket=PATH, /dev/nbdN or DIR/NAME.
	URL      string `json:"url,omitempty"`
	ReadOnly bool   `json:"read_only,omitempty"`
	// State is one of the State constants.
	State string `json:"state"`
	// Error is the last error (restore failure, lease loss).
	Error string `json:"error,omitempty"`
	// Holder and Epoch identify the ownership lease held.
	Holder string `json:"holder,omitempty"`
	Epoch  int64  `json:"epoch,omitempty"`
	// Size is the volume size in bytes.
	Size int64 `json:"size,omitempty"`
	// Since is when the mapping entered its state.
	Since time.Time `json:"since"`
	// Stats are the IO counters since the mapping was served.
	Stats Stats `json:"stats"`
}

// Stats are a mapping's IO counters.
type Stats struct {
	ReadBytes  int64 `json:"read_bytes"`
	WriteBytes int64 `json:"write_bytes"`
	Reads      int64 `json:"reads"`
	Writes     int64 `json:"writes"`
	// Errors counts IOs that failed.
	Errors int64 `json:"errors"`
	// Degraded counts stripe IOs that worked around missing shards.
	Degraded int64 `json:"degraded"`
	// NamespaceErrors counts shard errors (including corrupt data) per
	// namespace.
	NamespaceErrors map[string]int64 `json:"namespace_errors,omitempty"`
	// FailedReported lists namespaces this mapping reported failed to etcd.
	FailedReported []string `json:"failed_reported,omitempty"`
}
