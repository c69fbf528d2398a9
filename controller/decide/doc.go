// Package decide is the controller's pure decider: Decide(state, now, cfg)
// returns the Actions that keep the cluster's data where it should be
// (mark namespaces out or drained, rebuild, drain and rebalance shards,
// abort moves that cannot finish, finish rebalance tasks).
//
// It is a deterministic function of its inputs: given a State (namespaces,
// volumes, segments with their in-flight moves, operator tasks), the time
// and a Config, it returns the same Actions whatever the order of the
// State's slices. It reads no clock, does no IO, keeps nothing between
// calls and is safe to call from any goroutine. Its vocabulary (SegmentID,
// MoveKind, Move) is shared by the controller's runner, which reads State
// from metadata and carries the Actions out, and by the moves package,
// which hands moves to the volumes' owners.
//
// Its tests are table and property tests over State values and the
// scenario scripts in testdata (datadriven format).
package decide
