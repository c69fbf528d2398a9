// Package scale is the scale harness (tests only; `make scale`,
// docs/scale.md "etcd at 10,000 nodes"): one etcd started as the product
// starts it (meta/etcdembed, in a child process so that its CPU and memory
// are its own), a cluster record of hosts × namespaces, volumes placed by
// the real allocation code, and simulated nodes as goroutines, each
// mapping its volume through the real volclient.OpenVolume (ownership
// lease, its renewals and the watch of the owner key) and following the
// volume record as the agent does. It measures what etcd serves at steady
// state, the latency of map opens and lease renewals under that load, a
// path-state publication after a host failure, and the controller's read
// and decision over the whole cluster, and prints one table row per size.
//
// TestScale runs the sizes of -scale.sizes; TestScaleSmoke, part of `make
// test`, runs a tiny one and checks the costs that must not grow with the
// cluster. Nothing here is shared with other packages.
package scale
