package controller

import (
	"github.com/nvstripe/nvstripe/placement"
)

// PlanRebalance returns the moves that bring the spread of capacity use
// between namespaces in service under threshold (a fraction), as
// `admin rebalance` prints them. Segments with a move in flight stay put.
// domainLabel is the cluster's failure-domain label.
func (s *Snapshot) PlanRebalance(threshold float64, domainLabel string) (placement.RebalancePlan, error) {
	var nss []placement.Namespace
	for _, n := range s.State.Namespaces {
		nss = append(nss, n.Placement())
	}
	c, err := placement.NewCluster(s.State.Hosts, nss, domainLabel)
	if err != nil {
		return placement.RebalancePlan{}, err
	}
	shared := map[string]bool{}
	for _, v := range s.State.Volumes {
		shared[v.ID] = v.AllowSharedDomains
	}
	var segs []placement.Segment
	for _, sg := range s.State.Segments {
		if sg.Move != nil {
			continue
		}
		ps := placement.Segment{Volume: sg.ID.Volume, Index: sg.ID.Index, AllowSharedDomains: shared[sg.ID.Volume]}
		for _, sl := range sg.Slots {
			ps.Shards = append(ps.Shards, sl.NS)
		}
		segs = append(segs, ps)
	}
	return placement.PlanRebalance(c, segs, threshold)
}
