package decide

import (
	"fmt"
	"time"

	"github.com/nvstripe/nvstripe/placement"
)

// State is the snapshot Decide works on: plain values, read from metadata
// by the runner. Decide sorts what it needs and never modifies State.
type State struct {
	Hosts      []Host
	Namespaces []Namespace
	Volumes    []Volume
	Segments   []Segment
	Tasks      []Task
}

// Host is a storage host and its failure-domain labels (rack=r1), as
// placement sees it.
type Host = placement.Host

// Namespace is one namespace and its slot accounting.
type Namespace struct {
	ID    string
	Host  string
	State placement.State // in, draining, down, out or failed
	// Since is when State last changed. For a down namespace it starts the
	// out clock, so it must be set (a zero Since never goes out).
	Since time.Time
	// Capacity and Used count slots. Used counts every allocated slot,
	// the destinations of in-flight moves included.
	Capacity, Used int64
	// Unfenced: takes no new shards (placement.Namespace.Unfenced).
	Unfenced bool
}

// Placement returns n as placement sees it, the same for deciding and
// planning.
func (n Namespace) Placement() placement.Namespace {
	return placement.Namespace{ID: n.ID, Host: n.Host, State: n.State, Capacity: n.Capacity, Used: n.Used, Unfenced: n.Unfenced}
}

// Volume is what Decide needs of a volume.
type Volume struct {
	ID   string
	K, M int // data and parity shards per segment
	// OwnerPresent: the volume is mapped and its owner carries out moves;
	// otherwise the runner takes the volume's lock and does them. Decide
	// does not use it; the runner does, when it routes an Action.
	OwnerPresent bool
	// AllowSharedDomains lets shards share a failure domain when there are
	// too few domains.
	AllowSharedDomains bool
}

// SegmentID names a segment: its volume and its index in the volume.
type SegmentID struct {
	Volume string
	Index  int64
}

// String returns VOLUME/INDEX.
func (s SegmentID) String() string { return fmt.Sprintf("%s/%d", s.Volume, s.Index) }

// Compare orders segment IDs by volume, then index (-1, 0 or +1).
func (s SegmentID) Compare(o SegmentID) int {
	switch {
	case s.Volume < o.Volume:
		return -1
	case s.Volume > o.Volume:
		return 1
	case s.Index < o.Index:
		return -1
	case s.Index > o.Index:
		return 1
	}
	return 0
}

// Slot is one slot of a namespace.
type Slot struct {
	NS   string
	Slot int64
}

// Segment is one segment: its k+m slots (index = shard) and the move in
// flight, if any. A segment has at most one move in flight.
type Segment struct {
	ID    SegmentID
	Slots []Slot
	Move  *Move
}

// MoveKind says why a shard moves.
type MoveKind uint8

// Move kinds.
const (
	MoveRebuild   MoveKind = iota // the shard is lost: reconstruct it from the others
	MoveDrain                     // its namespace is draining: copy it away
	MoveRebalance                 // capacity is uneven: copy it to an emptier namespace
)

// String returns rebuild, drain or rebalance.
func (k MoveKind) String() string {
	switch k {
	case MoveRebuild:
		return "rebuild"
	case MoveDrain:
		return "drain"
	case MoveRebalance:
		return "rebalance"
	}
	return fmt.Sprintf("move-kind(%d)", uint8(k))
}

// Move is a shard move in flight, as recorded in metadata: the destination
// slot is allocated, new writes go to both places, data is being copied or
// reconstructed.
type Move struct {
	Shard   int
	Kind    MoveKind
	To      Slot
	Started time.Time
	// Updated is the time of the last progress report (zero: none yet).
	Updated     time.Time
	Done, Total int64 // bytes copied so far, of Total
	// Committed: the new placement is recorded; only the release of the
	// old slot is left, which waits for the volume's readers to follow
	// (meta.VolumeMap.FinishMove). A committed move is never aborted.
	Committed bool
}

// TaskKind is the kind of an operator task.
type TaskKind uint8

// Task kinds.
const (
	TaskRebalance TaskKind = iota // even out capacity use (`admin rebalance --apply`)
)

// Task is an operator request that spans many moves.
type Task struct {
	ID   string
	Kind TaskKind
	// Threshold (rebalance): the largest acceptable spread of used/capacity
	// between namespaces in service, as a fraction (0.05 = 5 points).
	Threshold float64
}
