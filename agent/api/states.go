package api

// Mapping states: the values of Mapping.State and the keys of
// StatusReply.Mappings.
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

// Mapping health: the values of Mapping.Health.
const (
	// HealthOK: served, every namespace up.
	HealthOK = "ok"
	// HealthDegraded: served, but namespaces are down (DownNamespaces); IO
	// works around them from parity.
	HealthDegraded = "degraded"
	// HealthFenced: the ownership lease was lost (State fenced).
	HealthFenced = "fenced"
	// HealthDetached: the kernel device was disconnected or stopped by
	// someone else; the volume is no longer served.
	HealthDetached = "detached"
)
