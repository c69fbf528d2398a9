// Package deploy holds no code: its tests keep the files under deploy/ true.
// The systemd units (deploy/systemd) must pass systemd-analyze verify and
// name only flags the nvstripe binary takes; the fstab example must make a
// mount that needs the agent; the example config must parse; and every
// Kubernetes manifest (deploy/kubernetes) must decode strictly into the
// Kubernetes API types, with the names, sockets and driver name that one
// manifest gives another agreeing. The Grafana dashboard (deploy/grafana)
// must parse and query only metrics package agent registers.
package deploy
