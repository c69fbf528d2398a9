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
