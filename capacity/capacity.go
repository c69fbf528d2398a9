// Package capacity says how much space a cluster has and how much its thin
// volumes promise (`nvstripe df`, and the check of `nvstripe volume
// create`).
//
// Per failure domain, and in total:
//   - raw: the bytes of the shard slots of namespaces that take shards
//     (state in, or down for now); draining, drained, out and failed ones
//     do not count;
//   - usable: the raw bytes a layout of width k+m can fill. A segment puts
//     its k+m slots in distinct domains (distinct namespaces with
//     --allow-shared-domains when domains are too few), so at most S
//     segments fit, the largest S with sum over domains of min(slots, S) >=
//     (k+m)*S, and a domain uses at most S of its slots: space beyond that
//     in one big domain cannot be used;
//   - allocated: the bytes of slots holding shards now (draining namespaces
//     included);
//   - promised: what the volumes promise after parity, size*(k+m)/k each,
//     shared among the domains in proportion to their usable bytes (as
//     placement fills them).
//
// Usable is computed for a reference layout: the widest layout of the
// volumes (the one the domains constrain most), 4+2 when there are none.
// The data bytes (after parity) are usable*k/(k+m) of it. Checksum areas
// (0.1% of a slot) are not taken off.
package capacity

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/placement"
)

// ErrOvercommitted: a new volume would bring what thin volumes promise past
// the cluster's limit.
var ErrOvercommitted = errors.New("over the cluster's overcommit limit")

// Namespace is one namespace as capacity sees it: placement's view of it
// (meta.PlacementNamespace).
type Namespace = placement.Namespace

// Volume is one volume's size and layout.
type Volume struct {
	Name   string
	Size   int64
	K, M   int
	Shared bool // --allow-shared-domains
}

// Input is what Compute needs: the cluster's hosts, namespaces and volumes.
type Input struct {
	SlotSize    int64
	DomainLabel string
	Hosts       []placement.Host
	Namespaces  []Namespace
	Volumes     []Volume
}

// Domain is one failure domain's space, in bytes.
type Domain struct {
	Domain     string `json:"domain"` // "host=NAME" or "LABEL=VALUE"
	Namespaces int    `json:"namespaces"`
	Raw        int64  `json:"raw_bytes"`
	Usable     int64  `json:"usable_bytes"`
	Allocated  int64  `json:"allocated_bytes"`
	Promised   int64  `json:"promised_bytes"`
}

// Report is the cluster's space: per domain and in total, in bytes.
type Report struct {
	Layout       string   `json:"layout"` // the reference layout usable is computed for, "k+m"
	K            int      `json:"k"`
	M            int      `json:"m"`
	Domains      []Domain `json:"domains"`
	Raw          int64    `json:"raw_bytes"`
	Usable       int64    `json:"usable_bytes"`
	UsableData   int64    `json:"usable_data_bytes"` // usable after parity: usable*k/(k+m)
	Allocated    int64    `json:"allocated_bytes"`
	Promised     int64    `json:"promised_bytes"`      // after parity: size*(k+m)/k per volume
	PromisedData int64    `json:"promised_data_bytes"` // the volumes' sizes
	// Overcommit is Promised/Usable (0 when nothing is usable).
	Overcommit float64 `json:"overcommit"`
}

// Compute describes in's space.
func Compute(in Input) (*Report, error) {
	k, m, shared := reference(in.Volumes)
	r := &Report{K: k, M: m, Layout: fmt.Sprintf("%d+%d", k, m)}
	byDomain, units, err := group(in)
	if err != nil {
		return nil, err
	}
	byNS := shared && len(units) < k+m // shards may share a domain: distinct namespaces are what counts
	if byNS {
		units = nil
		for _, ds := range byDomain {
			units = append(units, ds.slots...)
		}
	}
	s := maxSegments(units, k+m)
	for _, name := range sortedKeys(byDomain) {
		ds := byDomain[name]
		d := Domain{Domain: name, Namespaces: ds.namespaces, Raw: ds.raw * in.SlotSize, Allocated: ds.used * in.SlotSize,
			Usable: min(ds.raw, s) * in.SlotSize}
		if byNS {
			d.Usable = 0
			for _, c := range ds.slots {
				d.Usable += min(c, s) * in.SlotSize
			}
		}
		r.Domains = append(r.Domains, d)
		r.Raw, r.Usable, r.Allocated = r.Raw+d.Raw, r.Usable+d.Usable, r.Allocated+d.Allocated
	}
	for _, v := range in.Volumes {
		r.PromisedData += v.Size
		r.Promised += promisedRaw(v.Size, v.K, v.M)
	}
	r.UsableData = r.Usable / int64(k+m) * int64(k)
	if r.Usable > 0 {
		r.Overcommit = float64(r.Promised) / float64(r.Usable)
		for i := range r.Domains {
			r.Domains[i].Promised = int64(float64(r.Promised) * float64(r.Domains[i].Usable) / float64(r.Usable))
		}
	}
	return r, nil
}

// promisedRaw is the raw space a volume of size bytes and layout k+m
// takes once written: size*(k+m)/k, rounded up.
func promisedRaw(size int64, k, m int) int64 {
	return (size*int64(k+m) + int64(k) - 1) / int64(k)
}

// reference returns the widest layout of vols (the first of the widest),
// or 4+2, and whether it may share domains.
func reference(vols []Volume) (k, m int, shared bool) {
	k, m = 4, 2
	if len(vols) == 0 {
		return k, m, false
	}
	w := slices.MaxFunc(vols, func(a, b Volume) int { return cmp.Compare(a.K+a.M, b.K+b.M) })
	return w.K, w.M, w.Shared
}

// domainSlots are one domain's namespaces that take shards.
type domainSlots struct {
	namespaces int
	slots      []int64 // per namespace taking shards
	raw, used  int64   // slots
}

// group sums the namespaces per failure domain and returns, per domain,
// its slots for shards (the units a segment needs k+m distinct ones of).
func group(in Input) (map[string]*domainSlots, []int64, error) {
	c, err := placement.NewCluster(in.Hosts, in.Namespaces, in.DomainLabel)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]*domainSlots{}
	for _, n := range in.Namespaces {
		name := c.Domain(n.ID)
		ds := out[name]
		if ds == nil {
			ds = &domainSlots{}
			out[name] = ds
		}
		ds.namespaces++
		ds.used += n.Used
		if takesShards(n.State) {
			ds.raw += n.Capacity
			ds.slots = append(ds.slots, n.Capacity)
		}
	}
	var per []int64
	for _, name := range sortedKeys(out) {
		if out[name].raw > 0 {
			per = append(per, out[name].raw)
		}
	}
	return out, per, nil
}

// takesShards says whether a namespace in state st counts as capacity: in
// service, or down for now.
func takesShards(st placement.State) bool {
	return st == placement.StateIn || st == placement.StateDown
}

// maxSegments returns the most segments of width w that units of the given
// slot counts hold, each segment in w distinct units: the largest s with
// sum(min(c, s)) >= w*s.
func maxSegments(slots []int64, w int) int64 {
	if w <= 0 || len(slots) < w {
		return 0
	}
	var total int64
	for _, c := range slots {
		total += c
	}
	lo, hi := int64(0), total/int64(w)
	for lo < hi {
		mid := hi - (hi-lo)/2
		var n int64
		for _, c := range slots {
			n += min(c, mid)
		}
		if n >= int64(w)*mid {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Check judges a new or grown volume v by the cluster's space with it (r,
// the report with v among the volumes) and the limit: an error of class
// ErrOvercommitted beyond the limit, a warning past 1 (the volumes promise
// more than there is), or nothing.
func Check(r *Report, v Volume, limit float64) (warning string, err error) {
	if r.Usable == 0 || r.Overcommit <= 1 {
		return "", nil // nothing usable: creating the volume says why
	}
	what := fmt.Sprintf("thin volumes would promise %s after parity, %.2f times the %s usable by %s volumes across %d failure domains",
		units.FormatSize(r.Promised), r.Overcommit, units.FormatSize(r.Usable), r.Layout, len(r.Domains))
	if r.Overcommit > limit {
		return "", fmt.Errorf("volume %s (%s): %s, above the cluster's limit of %g (raise it with `nvstripe cluster set --max-overcommit R`, or add namespaces): %w",
			v.Name, units.FormatSize(v.Size), what, limit, ErrOvercommitted)
	}
	return fmt.Sprintf("volume %s: %s: writes fail for lack of space once it is used up (see `nvstripe df`)", v.Name, what), nil
}
