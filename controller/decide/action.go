package decide

import (
	"fmt"
	"time"
)

// Action is one thing Decide wants done. The runner carries each out and
// calls Decide again; Decide does not remember what it emitted, so an
// Action the runner could not do comes back next time.
//
// Who does what:
//   - Decide emits MarkOut, MarkDrained, RebuildShard, MoveShard, AbortMove,
//     FinishTask, Blocked and HoldOut.
//   - The runner starts a move (RebuildShard, MoveShard) by allocating a
//     slot on To and recording the Move in the segment in one transaction;
//     the copy then runs in the owner (or the runner, under the volume's
//     lock) and reports progress into Move.
//   - The runner commits a move itself when its copy finishes: the new map
//     in one transaction, then the old slot is freed. Decide never emits a
//     commit, since only the mover knows the copy is done and the commit
//     must follow it at once.
//   - AbortMove: the runner clears the Move and frees its destination slot
//     (one transaction); the shard stays where it was.
type Action interface {
	String() string
	isAction()
}

// MarkOut: namespace NS has been down since DownSince, longer than
// Config.OutAfter. The runner sets its state to out. (health.Tracker reports
// the same transition live; this is the durable rule that survives a
// controller failover, because it uses the Since stored in metadata.)
type MarkOut struct {
	NS        string
	DownSince time.Time
}

// MarkDrained: namespace NS is draining and holds no shard any more, with
// no move in flight from it. The runner sets its state to drained: it
// takes no shard and may be removed (`nvstripe ns rm`).
type MarkDrained struct {
	NS string
}

// RebuildShard: reconstruct shard Shard of Segment, lost with namespace
// From (out or failed), into a new slot on namespace To.
type RebuildShard struct {
	Segment  SegmentID
	Shard    int
	From, To string
}

// MoveShard: copy shard Shard of Segment from namespace From to a new slot
// on namespace To (Kind drain or rebalance).
type MoveShard struct {
	Segment  SegmentID
	Shard    int
	From, To string
	Kind     MoveKind
}

// AbortMove: roll back the move of shard Shard of Segment to To.
type AbortMove struct {
	Segment SegmentID
	Shard   int
	To      string
	Reason  string
}

// FinishTask: task Task has nothing left to do; the runner removes it.
type FinishTask struct {
	Task string
}

// Blocked: shard Shard of Segment needs a new home and placement has none
// (Err wraps placement.ErrNoSpace or placement.ErrNotEnoughDomains). The
// runner reports it (event, status, metric); nothing moves.
type Blocked struct {
	Segment SegmentID
	Shard   int
	Err     error
}

// HoldOut: namespaces are due to be marked out, but only Up of Hosts hosts
// with namespaces in service are up, fewer than Config.MinUpFraction: the
// controller is more likely cut off from the cluster than watching most of
// it die, and marking them out would start rebuilds with nowhere to go and,
// once the network heals, move data back. Nothing is marked out while it
// holds; the runner logs it.
type HoldOut struct {
	Up, Hosts int
	Due       []string // the namespaces held back
}

func (MarkOut) isAction()      {}
func (HoldOut) isAction()      {}
func (MarkDrained) isAction()  {}
func (RebuildShard) isAction() {}
func (MoveShard) isAction()    {}
func (AbortMove) isAction()    {}
func (FinishTask) isAction()   {}
func (Blocked) isAction()      {}

func (a MarkOut) String() string {
	return fmt.Sprintf("mark-out %s (down since %s)", a.NS, a.DownSince.Format(time.RFC3339))
}

func (a MarkDrained) String() string { return "mark-drained " + a.NS }

func (a HoldOut) String() string {
	return fmt.Sprintf("hold-out: only %d of %d hosts up; not marking out %v (check the controller's own network)", a.Up, a.Hosts, a.Due)
}

func (a RebuildShard) String() string {
	return fmt.Sprintf("rebuild %v shard %d %s -> %s", a.Segment, a.Shard, a.From, a.To)
}

func (a MoveShard) String() string {
	return fmt.Sprintf("move %v shard %d %s -> %s (%v)", a.Segment, a.Shard, a.From, a.To, a.Kind)
}

func (a AbortMove) String() string {
	return fmt.Sprintf("abort %v shard %d -> %s (%s)", a.Segment, a.Shard, a.To, a.Reason)
}

func (a FinishTask) String() string { return "finish-task " + a.Task }

func (a Blocked) String() string {
	return fmt.Sprintf("blocked %v shard %d: %v", a.Segment, a.Shard, a.Err)
}
