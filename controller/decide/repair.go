package decide

import (
	"cmp"
	"errors"
	"slices"

	"github.com/nvstripe/nvstripe/placement"
)

// repairJob is one shard that rule 3 wants moved.
type repairJob struct {
	seg       int // index into decider.segs
	shard     int
	kind      MoveKind // MoveRebuild or MoveDrain
	remaining int      // redundancy left in the segment
}

// repair applies rule 3 and reports whether any repair is pending or in
// flight (which holds rebalancing back).
func (d *decider) repair() bool {
	jobs := d.repairJobs()
	for _, j := range jobs {
		if d.active >= d.cfg.MaxMoves {
			break
		}
		d.startRepair(j)
	}
	inFlight := slices.ContainsFunc(d.segs, func(s Segment) bool { return s.Move != nil && s.Move.Kind != MoveRebalance })
	return len(jobs) > 0 || inFlight
}

// repairJobs lists one job per idle segment that needs one, in priority
// order: rebuilds by remaining redundancy, then drains; each by segment.
func (d *decider) repairJobs() []repairJob {
	var jobs []repairJob
	for i, s := range d.segs {
		if d.busy[s.ID] {
			continue
		}
		if j, ok := d.repairJob(i, s); ok {
			jobs = append(jobs, j)
		}
	}
	slices.SortStableFunc(jobs, func(a, b repairJob) int {
		if c := cmp.Compare(a.kind, b.kind); c != 0 {
			return c
		}
		return cmp.Compare(a.remaining, b.remaining)
	})
	return jobs
}

func (d *decider) repairJob(i int, s Segment) (repairJob, bool) {
	remaining, lost, drain := d.vols[s.ID.Volume].M, -1, -1
	for j, sl := range s.Slots {
		st, known := d.state(sl.NS)
		switch {
		case d.lost(sl.NS):
			remaining--
			if lost < 0 {
				lost = j
			}
		case known && st == placement.StateDown:
			remaining--
		case (st == placement.StateDraining || st == placement.StateDrained) && drain < 0:
			drain = j
		}
	}
	switch {
	case lost >= 0:
		return repairJob{seg: i, shard: lost, kind: MoveRebuild, remaining: remaining}, true
	case drain >= 0:
		return repairJob{seg: i, shard: drain, kind: MoveDrain, remaining: remaining}, true
	}
	return repairJob{}, false
}

// startRepair emits the move of one job, a Blocked, or nothing (caps).
func (d *decider) startRepair(j repairJob) {
	s := d.segs[j.seg]
	from, isCopy := s.Slots[j.shard].NS, j.kind == MoveDrain
	if !d.room(from, isCopy) {
		return
	}
	to, err := d.place(s, j.shard)
	switch {
	case errors.Is(err, errCapped):
		return
	case err != nil:
		d.out = append(d.out, Blocked{Segment: s.ID, Shard: j.shard, Err: err})
		return
	case j.kind == MoveRebuild:
		d.out = append(d.out, RebuildShard{Segment: s.ID, Shard: j.shard, From: from, To: to})
	default:
		d.out = append(d.out, MoveShard{Segment: s.ID, Shard: j.shard, From: from, To: to, Kind: j.kind})
	}
	d.busy[s.ID] = true
	d.addMove(from, isCopy, to)
	d.reserve(to)
}

// place asks placement for a new home for shard of s among namespaces
// below their cap. Other lost shards are left out of the request, so their
// dead domains do not count as used. It returns errCapped when the only
// obstacle may be the caps.
func (d *decider) place(s Segment, shard int) (string, error) {
	shards := make([]string, len(s.Slots))
	for j, sl := range s.Slots {
		if j == shard || !d.lost(sl.NS) {
			shards[j] = sl.NS
		}
	}
	c, err := d.cluster(true)
	if err != nil {
		return "", err
	}
	v := d.vols[s.ID.Volume]
	opts := placement.Options{Seed: placement.SegmentSeed(s.ID.Volume, s.ID.Index) ^ d.cfg.Seed, AllowSharedDomains: v.AllowSharedDomains}
	to, err := placement.PlanRebuild(c, shards, shard, opts)
	if err != nil && d.anyCapped() {
		return "", errCapped
	}
	return to, err
}

// rebalance applies rule 4.
func (d *decider) rebalance(tasks []Task, repairing bool) {
	if len(tasks) == 0 || repairing {
		return
	}
	t := slices.MinFunc(tasks, func(a, b Task) int { return cmp.Compare(a.ID, b.ID) })
	c, err := placement.NewCluster(d.hosts, d.settled(), d.cfg.DomainLabel)
	if err != nil {
		return // cannot happen: newDecider built the same cluster
	}
	var segs []placement.Segment
	for _, s := range d.segs {
		if !d.busy[s.ID] {
			segs = append(segs, d.placementSegment(s))
		}
	}
	plan, err := placement.PlanRebalance(c, segs, t.Threshold)
	if err != nil {
		return // cannot happen: checkTasks validated the threshold
	}
	if len(plan.Moves) == 0 && !slices.ContainsFunc(d.segs, func(s Segment) bool { return s.Move != nil }) {
		d.out = append(d.out, FinishTask{Task: t.ID})
	}
	for _, m := range plan.Moves {
		d.startRebalance(m)
	}
}

// settled returns the namespaces with the use they will have once the moves
// in flight are done: a move's source slot is freed only when it finishes,
// and its destination is reserved only when the owner begins it. Planning
// on the counts as they are would see a move's source as still full and
// move from it again in the next tick (a rebalance emptied one namespace
// of three shards that way, and finished with the spread above threshold).
func (d *decider) settled() []placement.Namespace {
	nss := slices.Clone(d.ns)
	for _, s := range d.segs {
		if s.Move == nil {
			continue
		}
		if i, ok := d.nsIdx[s.Slots[s.Move.Shard].NS]; ok && nss[i].Used > 0 {
			nss[i].Used--
		}
		if i, ok := d.nsIdx[s.Move.To.NS]; ok && s.Move.To.Slot < 0 {
			nss[i].Used++
		}
	}
	return nss
}

func (d *decider) placementSegment(s Segment) placement.Segment {
	ps := placement.Segment{Volume: s.ID.Volume, Index: s.ID.Index, AllowSharedDomains: d.vols[s.ID.Volume].AllowSharedDomains}
	for _, sl := range s.Slots {
		ps.Shards = append(ps.Shards, sl.NS)
	}
	return ps
}

// startRebalance emits one planned move if its segment is idle and the
// caps and the destination's free space allow.
func (d *decider) startRebalance(m placement.Move) {
	id := SegmentID{Volume: m.Volume, Index: m.Segment}
	to := d.ns[d.nsIdx[m.To]]
	if d.busy[id] || !d.room(m.From, true) || d.moves[m.To] >= d.cfg.MaxMovesPerNS || to.Free() <= 0 {
		return
	}
	d.out = append(d.out, MoveShard{Segment: id, Shard: m.Shard, From: m.From, To: m.To, Kind: MoveRebalance})
	d.busy[id] = true
	d.addMove(m.From, true, m.To)
	d.reserve(m.To)
}
