// Package controller keeps the cluster's data where it should be: it
// decides which shards to rebuild, drain and rebalance, and paces the data
// movement.
//
// The package follows "decide, then do":
//
//   - Decide(state, now, cfg) is pure and deterministic: given a snapshot
//     State (namespaces, volumes, segments with their in-flight moves,
//     operator tasks) and the time, it returns the Actions to take now. It
//     reads no clock, does no IO and keeps nothing between calls; it is
//     safe to call from any goroutine.
//   - A runner (wired elsewhere) reads State from metadata, calls Decide,
//     carries the Actions out (metadata transactions, data movement through
//     the volume's owner or itself) and calls Decide again. What Decide
//     emits and what the runner does is listed on Action.
//   - Pacer meters the bytes the movers copy: a bandwidth limit that shrinks
//     while foreground latency rises. Its pure core Throttle takes time as
//     an argument; Pacer adds a lock and a Wait loop and is safe for
//     concurrent use.
package controller
