package controller

import (
	"context"
	"slices"
	"sort"
	"time"
)

// StaleRepairer rebuilds in place the slots of a volume nobody has mapped
// that are marked stale (they missed writes while their namespace was
// unreachable) and whose namespace answers again, clearing their marks. It
// takes the volume's read-write ownership as a Mover does. A Mover that also
// implements it (volclient.TaskMover does) is used for such volumes: without it
// they stay degraded until someone maps them read-write.
type StaleRepairer interface {
	RepairStale(ctx context.Context, volume string) (stripes int64, err error)
}

// repairStale starts, for each volume that nobody maps and that has stale
// slots on namespaces in service, a repair by the Mover (one per volume at
// a time, in the background; it is cancelled with leadership). A volume
// whose marks outlive a repair (its namespace does not answer after all, or
// the ownership was busy) is tried again after a wait: from Interval,
// doubling, to maxBackoff.
func (r *Runner) repairStale(ctx context.Context, snap *Snapshot, now time.Time) {
	sr, ok := r.cfg.Mover.(StaleRepairer)
	if !ok {
		return
	}
	vols := staleVolumes(snap)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.repairing == nil {
		r.repairing, r.repairWait = map[string]bool{}, map[string]volBackoff{}
	}
	for v := range r.repairWait {
		if !slices.Contains(vols, v) {
			delete(r.repairWait, v) // repaired
		}
	}
	for _, v := range vols {
		if snap.Owners[v] != "" {
			continue // an owner repairs its own (readers do not write)
		}
		if b := r.repairWait[v]; r.repairing[v] || now.Before(b.until) {
			continue
		}
		r.repairing[v] = true
		r.wg.Add(1)
		go r.runStaleRepair(ctx, sr, v)
	}
}

func (r *Runner) runStaleRepair(ctx context.Context, sr StaleRepairer, v string) {
	defer r.wg.Done()
	r.cfg.Logf("volume %s: repairing slots that missed writes (nobody maps it)", v)
	n, err := sr.RepairStale(ctx, v)
	r.mu.Lock()
	delete(r.repairing, v)
	r.repairWait[v] = r.repairWait[v].grow(r.cfg.Now(), r.cfg.Interval)
	r.mu.Unlock()
	if err != nil {
		r.cfg.Logf("volume %s: repair of slots that missed writes stopped after %d stripes: %v", v, n, err)
		return
	}
	r.cfg.Logf("volume %s: rebuilt %d stripes of slots that missed writes", v, n)
}

// staleVolumes lists, sorted, the volumes with a slot marked stale whose
// namespace is in service (in or draining): a repair can reach it. Slots on
// namespaces that are down wait; out ones are rebuilt elsewhere by moves.
func staleVolumes(snap *Snapshot) []string {
	set := map[string]bool{}
	for id, slots := range snap.Stale {
		r := snap.Segments[id.Volume][id.Index]
		for i := range slots {
			if inService(snap.Namespaces[r.Slots[i].NS]) {
				set[id.Volume] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}
