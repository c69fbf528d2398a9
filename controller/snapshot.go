package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/placement"
)

// Snapshot is the cluster as one read of metadata saw it: the State Decide
// works on plus what the runner and `admin status` need besides. Namespace
// Since and Move Started/Updated are only as good as the task records (the
// runner completes them from what it has seen).
type Snapshot struct {
	// Rev is the etcd revision every record was read at: the snapshot is
	// the metadata as it stood at that one moment.
	Rev        int64
	State      decide.State
	Namespaces map[string]*meta.NamespaceRecord
	Volumes    map[string]*meta.VolumeRecord
	// Owners maps a volume to the holder of its read-write lease ("" none).
	Owners map[string]string
	// Readers maps a volume to the holders of its read-only leases.
	Readers map[string][]string
	// MoveTasks are the move task records by segment; Tasks all records.
	MoveTasks map[decide.SegmentID]moves.Task
	Tasks     []*meta.TaskRecord
	// Segments holds each volume's segment records by index.
	Segments map[string]map[int64]*meta.SegmentRecord
	// Stale holds, per segment, the slot indexes whose current location
	// is marked stale (it missed writes; meta.VolumeMap.Stale). A volume's
	// owner rebuilds them in place once their namespace answers.
	Stale map[decide.SegmentID]map[int]bool
	// StaleStripes holds, for the stale slots that missed only some
	// stripes (their namespace ran out of space), those stripes as
	// [from, to) pairs.
	StaleStripes map[decide.SegmentID]map[int][][2]int64
}

// compactRetries is how many more times LoadSnapshot pins a fresh revision
// when etcd compacted the one it was reading at.
const compactRetries = 2

// LoadSnapshot reads hosts, namespaces (with allocation counts), volumes,
// their owners and segments, and tasks, all at one etcd revision
// (Snapshot.Rev): a store pinned by meta.Store.At or AtRev is read at its
// revision; any other is pinned at its current one, and pinned afresh (up to
// compactRetries times) when etcd compacts that revision during the read.
func LoadSnapshot(ctx context.Context, store *meta.Store) (*Snapshot, error) {
	return loadPinned(ctx, store, loadAt)
}

// loadPinned runs load on a view of store pinned at one revision, retrying
// with a fresh revision while load fails with meta.ErrCompacted.
func loadPinned(ctx context.Context, store *meta.Store, load func(context.Context, *meta.Store) (*Snapshot, error)) (*Snapshot, error) {
	if store.Rev() != 0 {
		return load(ctx, store)
	}
	var err error
	for range compactRetries + 1 {
		view, perr := store.At(ctx)
		if perr != nil {
			return nil, fmt.Errorf("load snapshot: %w", perr)
		}
		var s *Snapshot
		if s, err = load(ctx, view); !errors.Is(err, meta.ErrCompacted) {
			return s, err
		}
	}
	return nil, fmt.Errorf("load snapshot: etcd compacted the revision being read %d times in a row (compaction keeps too little history?): %w",
		compactRetries+1, err)
}

// loadAt reads the snapshot through store, a view pinned at one revision.
func loadAt(ctx context.Context, store *meta.Store) (*Snapshot, error) {
	s, err := loadCluster(ctx, store)
	if err != nil {
		return nil, err
	}
	if err := s.loadVolumes(ctx, store); err != nil {
		return nil, err
	}
	s.sortSegments()
	return s, nil
}

// loadCluster returns a snapshot at store's revision with its hosts,
// namespaces and tasks read, and no volumes yet.
func loadCluster(ctx context.Context, store *meta.Store) (*Snapshot, error) {
	s := newSnapshot(store.Rev())
	if err := s.loadHosts(ctx, store); err != nil {
		return nil, err
	}
	if err := s.loadTasks(ctx, store); err != nil {
		return nil, err
	}
	return s, nil
}

// newSnapshot returns an empty snapshot at revision rev.
func newSnapshot(rev int64) *Snapshot {
	return &Snapshot{Rev: rev, Namespaces: map[string]*meta.NamespaceRecord{}, Volumes: map[string]*meta.VolumeRecord{},
		Owners: map[string]string{}, Readers: map[string][]string{}, MoveTasks: map[decide.SegmentID]moves.Task{},
		Segments: map[string]map[int64]*meta.SegmentRecord{}, Stale: map[decide.SegmentID]map[int]bool{},
		StaleStripes: map[decide.SegmentID]map[int][][2]int64{}}
}

// sortSegments puts the segments Decide works on in segment order.
func (s *Snapshot) sortSegments() {
	sort.Slice(s.State.Segments, func(i, j int) bool { return s.State.Segments[i].ID.Compare(s.State.Segments[j].ID) < 0 })
}

func (s *Snapshot) loadHosts(ctx context.Context, store *meta.Store) error {
	hosts, err := store.Hosts(ctx)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		s.State.Hosts = append(s.State.Hosts, decide.Host{Name: h.Name, Labels: h.Labels})
	}
	nss, err := store.Namespaces(ctx)
	if err != nil {
		return err
	}
	allocs, err := store.Allocations(ctx)
	if err != nil {
		return err
	}
	for _, n := range nss {
		a, err := meta.AllocationOf(allocs, n)
		if err != nil {
			return err
		}
		s.Namespaces[n.ID] = n
		p := meta.PlacementNamespace(n, a)
		s.State.Namespaces = append(s.State.Namespaces, decide.Namespace{ID: p.ID, Host: p.Host, State: p.State,
			Capacity: p.Capacity, Used: p.Used, Unfenced: p.Unfenced})
	}
	return nil
}

func (s *Snapshot) loadTasks(ctx context.Context, store *meta.Store) error {
	ts, err := store.Tasks(ctx)
	if err != nil {
		return err
	}
	s.Tasks = ts
	for _, r := range ts {
		if mt, ok, err := moves.ParseTask(r); ok && err == nil {
			s.MoveTasks[mt.Segment] = mt
		} else if t, ok, err := ParseTask(r); ok && err == nil && r.State == meta.TaskRunning {
			s.State.Tasks = append(s.State.Tasks, t)
		}
	}
	return nil
}

// loadVolumes reads the volumes and, for those ready, their owners, segments
// and stale marks: one read of each prefix, not one a volume.
func (s *Snapshot) loadVolumes(ctx context.Context, store *meta.Store) error {
	vols, err := store.Volumes(ctx)
	if err != nil {
		return err
	}
	var ready []string
	for _, v := range vols {
		if v.State == meta.VolumeReady {
			ready = append(ready, v.Name)
		}
	}
	parts, err := store.VolumesParts(ctx, ready)
	if err != nil {
		return err
	}
	for _, v := range vols {
		if v.State == meta.VolumeReady {
			s.addVolume(v, parts[v.Name])
		}
	}
	return nil
}

// addVolume adds ready volume v with its parts p.
func (s *Snapshot) addVolume(v *meta.VolumeRecord, p *meta.VolumeParts) {
	for _, o := range p.Owners {
		if o.Mode == meta.ModeRW {
			s.Owners[v.Name] = o.Holder
		} else {
			s.Readers[v.Name] = append(s.Readers[v.Name], o.Holder)
		}
	}
	s.addStale(v.Name, p.Stale, p.Segments)
	s.Volumes[v.Name] = v
	s.Segments[v.Name] = p.Segments
	s.State.Volumes = append(s.State.Volumes, decide.Volume{ID: v.Name, K: v.Layout.K, M: v.Layout.M,
		OwnerPresent: s.Owners[v.Name] != "", AllowSharedDomains: v.AllowSharedDomains})
	for idx, r := range p.Segments {
		s.State.Segments = append(s.State.Segments, s.segment(decide.SegmentID{Volume: v.Name, Index: idx}, r, v))
	}
}

// addStale keeps the stale marks that name a slot's current location (a
// mark left behind by a move names the old one).
func (s *Snapshot) addStale(vol string, marks []meta.StaleMark, segs map[int64]*meta.SegmentRecord) {
	for _, m := range marks {
		r := segs[m.Segment]
		if r == nil || m.Index >= len(r.Slots) || r.Slots[m.Index] != m.Ref {
			continue
		}
		id := decide.SegmentID{Volume: vol, Index: m.Segment}
		if s.Stale[id] == nil {
			s.Stale[id] = map[int]bool{}
		}
		s.Stale[id][m.Index] = true
		if len(m.Stripes) > 0 {
			if s.StaleStripes[id] == nil {
				s.StaleStripes[id] = map[int][][2]int64{}
			}
			s.StaleStripes[id][m.Index] = m.Stripes
		}
	}
}

func (s *Snapshot) segment(id decide.SegmentID, r *meta.SegmentRecord, v *meta.VolumeRecord) decide.Segment {
	seg := decide.Segment{ID: id, Slots: make([]decide.Slot, len(r.Slots))}
	for i, sl := range r.Slots {
		seg.Slots[i] = decide.Slot{NS: sl.NS, Slot: sl.Slot}
	}
	if r.Move == nil {
		if t, ok := s.MoveTasks[id]; ok && t.State == meta.TaskRunning {
			// Handed to the owner, which has not begun it (no move record
			// yet): it is in flight all the same, so Decide must neither
			// plan the segment again nor think a rebalance is over.
			seg.Move = &decide.Move{Shard: t.Shard, To: decide.Slot{NS: t.To, Slot: -1}, Kind: t.Kind,
				Started: t.Started, Done: t.Done, Total: t.Total}
		}
		return seg
	}
	mv := &decide.Move{Shard: r.Move.Shard, To: decide.Slot{NS: r.Move.To.NS, Slot: r.Move.To.Slot}, Kind: decide.MoveRebalance, Committed: r.Move.Committed()}
	if t, ok := s.MoveTasks[id]; ok && t.Shard == r.Move.Shard {
		mv.Kind, mv.Started, mv.Done, mv.Total = t.Kind, t.Started, t.Done, t.Total
	} else if n := s.Namespaces[r.Slots[r.Move.Shard].NS]; n != nil && n.State == placement.StateDraining.String() {
		mv.Kind = decide.MoveDrain
	} else if n == nil || n.State == placement.StateOut.String() || n.State == placement.StateFailed.String() {
		mv.Kind = decide.MoveRebuild
	}
	seg.Move = mv
	return seg
}

// VolumeHealth is one volume's redundancy.
type VolumeHealth struct {
	Volume string
	K, M   int
	// Segments allocated; Lost is the most shards one segment has on
	// namespaces not in service (down, out, failed or unknown) or marked
	// stale (they missed writes and are not yet rebuilt).
	Segments, Lost int
	// Stale counts slots marked stale.
	Stale int
	// Degraded counts segments with a lost shard; Moving those with a
	// move in flight.
	Degraded, Moving int
}

// Status returns healthy, "degraded by N", "at risk" (no redundancy left)
// or "unreadable" (more shards lost than parity).
func (h VolumeHealth) Status() string {
	switch {
	case h.Lost == 0:
		return "healthy"
	case h.Lost > h.M:
		return "unreadable"
	case h.Lost == h.M:
		return "at risk"
	}
	return fmt.Sprintf("degraded by %d", h.Lost)
}

// Health returns each volume's redundancy, in volume order.
func (s *Snapshot) Health() []VolumeHealth {
	var out []VolumeHealth
	for _, v := range s.State.Volumes {
		h := VolumeHealth{Volume: v.ID, K: v.K, M: v.M}
		for idx, r := range s.Segments[v.ID] {
			h.Segments++
			id := decide.SegmentID{Volume: v.ID, Index: idx}
			stale, stripes := s.Stale[id], s.StaleStripes[id]
			h.Stale += len(stale)
			lost := 0
			var partial [][][2]int64 // in service, missing some stripes only
			for i, sl := range r.Slots {
				switch n := s.Namespaces[sl.NS]; {
				case !inService(n) || stale[i] && stripes[i] == nil:
					lost++
				case stale[i]:
					partial = append(partial, stripes[i])
				}
			}
			lost += mostOverlapping(partial)
			h.Lost = max(h.Lost, lost)
			if lost > 0 {
				h.Degraded++
			}
			if r.Move != nil {
				h.Moving++
			}
		}
		out = append(out, h)
	}
	return out
}

// mostOverlapping returns the most of the stripe lists ([from, to) pairs,
// each sorted and disjoint) that one stripe is in.
func mostOverlapping(lists [][][2]int64) int {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, l := range lists {
		for _, r := range l {
			edges = append(edges, edge{r[0], 1}, edge{r[1], -1})
		}
	}
	sort.Slice(edges, func(i, j int) bool {
		return edges[i].at < edges[j].at || edges[i].at == edges[j].at && edges[i].delta < edges[j].delta
	})
	most, cur := 0, 0
	for _, e := range edges {
		cur += e.delta
		most = max(most, cur)
	}
	return most
}

// inService reports whether namespace n (nil: unknown) serves its slots: in
// or draining.
func inService(n *meta.NamespaceRecord) bool {
	return n != nil && (n.State == placement.StateIn.String() || n.State == placement.StateDraining.String())
}
