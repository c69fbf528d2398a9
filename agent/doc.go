// Package agent is the node-side wiring of nvstripe: it opens a volume the
// way a training node uses it — ownership lease and placement from etcd
// (package meta), one NVMe/TCP initiator per namespace with its paths
// (package nvmeof/initiator), namespace labels checked before use, the
// erasure-coded engine (package volume) on top — and serves it over NBD or
// FUSE.
//
// Concurrency: a Mapped volume is safe for concurrent use; Close is
// idempotent.
package agent
