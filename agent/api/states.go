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
