// Package health turns gossip membership into host and namespace health.
//
// It has two halves:
//
//   - Node wraps a hashicorp/memberlist member: it gossips this process's
//     Meta (role, host, failure-domain labels, the namespaces it serves),
//     joins and leaves a pool, lists Members and reports each membership
//     change as an Event through Config.OnEvent. Node is safe for concurrent
//     use; OnEvent is called from memberlist's goroutines, one call at a time.
//   - Tracker is a pure state machine: fed with Events and owner-reported IO
//     errors, each with the time it happened, Tick(now) returns the state
//     transitions of hosts (up, down, out) and namespaces (failed). It reads
//     no clock and does no IO, so it is tested with explicit times. It is not
//     safe for concurrent use: its owner serialises calls.
//
// # In nvstripe
//
// Targets gossip as RoleTarget with Meta.Host = the host's name in etcd
// (`nvstripe target serve --gossip`, or `nvstripe target agent` beside a
// kernel nvmet or SPDK target); a target member is named after its host.
// Controllers gossip as RoleController named after their holder
// (`nvstripe controller --gossip`). Members find the pool through
// --gossip-join or the seed records they register in etcd
// (meta.GossipRecord); memberlist keeps the pool together from then on.
// The controller (controller.Gossip) judges a host by its target members:
// alive while one is; it maps the host to its namespaces through etcd, so
// a target's Meta.Namespaces is informational there. A member that leaves
// and one that dies both read StatusDead: a stopped target's namespaces go
// down after the grace period either way.
//
// Anyone who reaches a gossip port can join a pool and speak for any host
// unless the pool has a key (Config.Key, `--gossip-key-file`): memberlist
// then encrypts and authenticates every message with it (AES-GCM) and drops
// the rest. Every member is labelled with its cluster (Config.Label), so
// pools of two clusters never merge.
//
// # Meta wire format
//
// Meta travels in memberlist's node metadata (at most 512 bytes). It is
// encoded as: one version byte (1); the role as one byte (1 target,
// 2 agent, 3 controller); the host name; a uvarint count of labels followed
// by that many key, value pairs sorted by key; a uvarint count of namespace
// IDs followed by the IDs. Every string is a uvarint length followed by its
// bytes. Decoding rejects a different version, trailing bytes and lengths
// past the end.
package health
