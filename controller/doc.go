// Package controller keeps the cluster's data where it should be: its
// Runner, the `nvstripe controller` daemon's loop, decides which shards to
// rebuild, drain and rebalance (through the pure decider, package
// controller/decide) and carries the moves out.
//
// The package follows "decide, then do":
//
//   - decide.Decide(state, now, cfg) is pure and deterministic: given a
//     snapshot State (namespaces, volumes, segments with their in-flight
//     moves, operator tasks) and the time, it returns the Actions to take
//     now. It lives in its own package, which imports no IO.
//   - Runner (the `nvstripe controller` daemon's loop) campaigns for
//     leadership in etcd; while it leads it reads a Snapshot from metadata
//     every tick, judges which hosts are alive and feeds a health.Tracker
//     (down after a grace period, back in when alive again, flapping held
//     down), calls Decide and carries the Actions out: MarkOut
//     and AbortMove in metadata; a move of a mapped volume becomes a task
//     record its owner executes (volclient's Mapped.ServeTasks); a move of a
//     volume nobody maps runs here, through a Mover (volclient.TaskMover)
//     under the volume's ownership, paced by a moves.Pacer. Moves nobody
//     carries out any more (a crashed mover) are settled: finished when
//     committed, rolled back otherwise. Leadership lost: every move of this
//     runner is cancelled at once and rolls back; the next leader
//     re-decides from etcd. What Decide emits and what the runner does is
//     listed on decide.Action.
//   - Liveness: a host with a target member in the gossip pool is judged
//     by gossip (RunnerConfig.Gossip: a Gossip is the health.Node's OnEvent
//     and queues the events, stamped, for the runner, which feeds them to
//     its tracker in its own goroutine at each tick: the tracker stays
//     serialised and memberlist is never blocked). The host is alive while
//     one of its target members is. Hosts never seen in gossip are probed
//     over TCP instead (RunnerConfig.Probe, ProbeTCP), so clusters whose
//     targets do not gossip work as before. Only down and back in are
//     decided here; out comes from Decide (decide.Config.OutAfter).
//   - Read-only mappings: a volume mapped read-only and read-write by
//     nobody is moved like an unmapped one: the Mover takes the volume's
//     read-write lease as a mover (meta.OwnerOptions.Mover), which readers
//     share, and its moves do not change data. Readers follow the segment
//     map (volclient's follower) and publish the revision they applied; a
//     committed move's old slot is released only once every reader applied
//     it or lost its lease (meta.VolumeMap.FinishMove). Until then the
//     committed move stays in the segment record: it is never aborted
//     (decide.Move.Committed), and settling it (a crashed mover's) waits too.
//     Stale slots of such a volume are repaired in place the same way. A
//     Mover that finds a volume's ownership busy (a read-write mapping
//     raced the snapshot) holds the volume back from Decide (holdBack),
//     for Interval doubling to a minute.
//   - Task records: a move's parameters and progress live in a
//     meta.TaskRecord of kind meta.TaskMove (moves.Task is its codec), one
//     per segment; a rebalance request is a task record too
//     (RebalanceRecord). Records older builds wrote, with the parameters as
//     words in Kind, are still read, and MigrateTasks rewrites them when the
//     runner starts leading.
//   - The pacer, the move events and their log lines are in package moves,
//     which the node (agent, volclient) imports without this package.
package controller
