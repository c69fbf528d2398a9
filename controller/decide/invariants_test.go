package decide

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/placement"
)

// checkInvariants checks Decide's documented invariants I1-I3 on acts,
// the result of Decide(st, now, cfg).
func checkInvariants(t *testing.T, pos string, st State, now time.Time, cfg Config, acts []Action) {
	t.Helper()
	cfg.EnsureDefaults()
	for _, err := range invariantErrors(st, cfg, acts) {
		t.Errorf("%s: %v\nactions: %v", pos, err, acts)
	}
}

func invariantErrors(st State, cfg Config, acts []Action) []error {
	nss, segs, vols := map[string]Namespace{}, map[SegmentID]Segment{}, map[string]Volume{}
	for _, n := range st.Namespaces {
		nss[n.ID] = n
	}
	for _, a := range acts {
		if mo, ok := a.(MarkOut); ok { // out from here on
			n := nss[mo.NS]
			n.State = placement.StateOut
			nss[mo.NS] = n
		}
	}
	for _, s := range st.Segments {
		segs[s.ID] = s
	}
	for _, v := range st.Volumes {
		vols[v.ID] = v
	}
	domain := domainFunc(st, cfg)
	var errs []error
	busy, perNS, total, added := map[SegmentID]bool{}, map[string]int{}, 0, 0
	aborted := map[SegmentID]bool{}
	for _, a := range acts {
		if ab, ok := a.(AbortMove); ok {
			aborted[ab.Segment] = true
		}
	}
	for _, s := range st.Segments {
		if m := s.Move; m != nil {
			busy[s.ID] = true
			if !aborted[s.ID] {
				total++
				perNS[m.To.NS]++
				if m.Kind != MoveRebuild {
					perNS[s.Slots[m.Shard].NS]++
				}
			}
		}
	}
	touched := map[string]bool{}
	for _, a := range acts {
		id, shard, from, to, isCopy, ok := moveOf(a)
		if !ok {
			continue
		}
		added++
		total++
		perNS[to]++
		touched[to] = true
		if isCopy {
			perNS[from]++
			touched[from] = true
		}
		if busy[id] {
			errs = append(errs, fmt.Errorf("I1: second move for segment %v: %v", id, a))
		}
		busy[id] = true
		errs = append(errs, checkTarget(nss, segs[id], vols[id.Volume], shard, to, domain)...)
	}
	if added > 0 && total > cfg.MaxMoves {
		errs = append(errs, fmt.Errorf("I3: %d moves in flight, cap %d", total, cfg.MaxMoves))
	}
	for ns := range touched {
		if perNS[ns] > cfg.MaxMovesPerNS {
			errs = append(errs, fmt.Errorf("I3: %d moves on %s, cap %d", perNS[ns], ns, cfg.MaxMovesPerNS))
		}
	}
	if total < cfg.MaxMoves && !anyAtCap(nss, perNS, cfg) {
		errs = append(errs, liveness(st, nss, acts)...)
	}
	return errs
}

func anyAtCap(nss map[string]Namespace, perNS map[string]int, cfg Config) bool {
	for id, n := range nss {
		if n.State == placement.StateIn && perNS[id] >= cfg.MaxMovesPerNS {
			return true
		}
	}
	return false
}

// liveness: with no cap in the way, every idle segment with a lost shard
// gets a rebuild or is reported blocked.
func liveness(st State, nss map[string]Namespace, acts []Action) []error {
	handled := map[SegmentID]bool{}
	for _, a := range acts {
		switch a := a.(type) {
		case RebuildShard:
			handled[a.Segment] = true
		case Blocked:
			handled[a.Segment] = true
		}
	}
	var errs []error
	for _, s := range st.Segments {
		lost := slices.ContainsFunc(s.Slots, func(sl Slot) bool {
			n, ok := nss[sl.NS]
			return !ok || n.State == placement.StateOut || n.State == placement.StateFailed
		})
		if s.Move == nil && lost && !handled[s.ID] {
			errs = append(errs, fmt.Errorf("liveness: %v lost a shard and got no rebuild", s.ID))
		}
	}
	return errs
}

func moveOf(a Action) (id SegmentID, shard int, from, to string, isCopy, ok bool) {
	switch a := a.(type) {
	case RebuildShard:
		return a.Segment, a.Shard, a.From, a.To, false, true
	case MoveShard:
		return a.Segment, a.Shard, a.From, a.To, true, true
	}
	return SegmentID{}, 0, "", "", false, false
}

// checkTarget checks I2 for a new move of shard of s to namespace to.
func checkTarget(nss map[string]Namespace, s Segment, v Volume, shard int, to string, domain func(string) string) []error {
	var errs []error
	if n, ok := nss[to]; !ok || n.State != placement.StateIn {
		errs = append(errs, fmt.Errorf("I2: %v shard %d to %s, not in service", s.ID, shard, to))
	}
	for j, sl := range s.Slots {
		n, known := nss[sl.NS]
		gone := !known || n.State == placement.StateOut || n.State == placement.StateFailed
		switch {
		case sl.NS == to:
			errs = append(errs, fmt.Errorf("I2: %v shard %d to %s, which holds shard %d", s.ID, shard, to, j))
		case j != shard && !gone && !v.AllowSharedDomains && domain(sl.NS) == domain(to):
			errs = append(errs, fmt.Errorf("I2: %v shard %d to %s shares domain %s with shard %d", s.ID, shard, to, domain(to), j))
		}
	}
	return errs
}

// domainFunc returns the failure domain of a namespace, as placement
// defines it (checked against placement.Cluster.Domain).
func domainFunc(st State, cfg Config) func(string) string {
	host := map[string]Host{}
	for _, h := range st.Hosts {
		host[h.Name] = h
	}
	nsHost := map[string]string{}
	for _, n := range st.Namespaces {
		nsHost[n.ID] = n.Host
	}
	return func(ns string) string {
		h := host[nsHost[ns]]
		if v := h.Labels[cfg.DomainLabel]; cfg.DomainLabel != "" && v != "" {
			return cfg.DomainLabel + "=" + v
		}
		return "host=" + h.Name
	}
}
