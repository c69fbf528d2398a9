// Package moves holds what a shard move needs on both sides of its
// hand-over: the controller records a move of a mapped volume as a task
// (Task, its meta.TaskRecord codec, TaskID) that the volume's owner carries
// out, or asks its own mover to carry it out (Request); either reports its
// start and end (Event, logged by Log) and meters the bytes it copies with a
// Pacer: a bandwidth limit that shrinks while foreground latency rises. Its
// pure core Throttle takes time as an argument; Pacer adds a lock and a Wait
// loop and is safe for concurrent use.
//
// The node (agent, volclient) imports it without the controller's runner;
// it imports meta for the record and controller/decide for the move's
// vocabulary (SegmentID, MoveKind).
package moves
