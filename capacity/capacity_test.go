package capacity

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/placement"
)

const slot = 1 << 20

// cluster builds an Input of one host per entry, each with one namespace of
// that many slots (state in), with rack labels when racks is set.
func cluster(slots []int64, racks []string, vols ...Volume) Input {
	in := Input{SlotSize: slot, Volumes: vols}
	if racks != nil {
		in.DomainLabel = "rack"
	}
	for i, c := range slots {
		h := placement.Host{Name: fmt.Sprintf("h%d", i)}
		if racks != nil {
			h.Labels = map[string]string{"rack": racks[i]}
		}
		in.Hosts = append(in.Hosts, h)
		in.Namespaces = append(in.Namespaces, Namespace{ID: fmt.Sprintf("h%d-n1", i), Host: h.Name, State: placement.StateIn, Capacity: c})
	}
	return in
}

func TestCompute(t *testing.T) {
	big := cluster([]int64{100, 10, 10, 10, 10, 10}, nil)
	racks := cluster([]int64{10, 10, 10, 10}, []string{"r0", "r0", "r1", "r2"}, Volume{Name: "v", Size: 20 * slot, K: 2, M: 1})
	shared := cluster([]int64{10, 10, 10, 10}, nil, Volume{Name: "v", Size: 8 * slot, K: 4, M: 2, Shared: true})
	out := cluster([]int64{10, 10, 10, 10, 10, 10, 10}, nil, Volume{Name: "v", Size: 40 * slot, K: 4, M: 2})
	out.Namespaces[0].State, out.Namespaces[0].Used = placement.StateDrained, 0
	out.Namespaces[1].State, out.Namespaces[1].Used = placement.StateDraining, 3
	for _, tc := range []struct {
		name                              string
		in                                Input
		layout                            string
		raw, usable, usableData, promised int64 // slots
		overcommit                        float64
		domains                           int
		firstUsable                       int64 // slots of the first domain
	}{
		// One big domain: a 4+2 segment takes one slot per domain, so at
		// most 10 segments fit and 90 slots of h0 stay unusable.
		{name: "big domain", in: big, layout: "4+2", raw: 150, usable: 60, usableData: 40, domains: 6, firstUsable: 10},
		// Racks r0 (20 slots), r1, r2 (10 each): 2+1 fits 10 segments
		// (S=11: 11+10+10 = 31 < 33), so r0 uses 10 of its 20 slots.
		{name: "racks", in: racks, layout: "2+1", raw: 40, usable: 30, usableData: 20, promised: 30, overcommit: 1, domains: 3, firstUsable: 10},
		// 4+2 across 4 hosts with shared domains: distinct namespaces count,
		// 4 of 10 slots; no 6 distinct ones exist, so nothing is usable.
		{name: "shared, too few namespaces", in: shared, layout: "4+2", raw: 40, usable: 0, promised: 12, domains: 4},
		// Drained and draining namespaces are not capacity; the draining
		// one's slots are still allocated.
		{name: "draining", in: out, layout: "4+2", raw: 50, usable: 0, promised: 60, domains: 7},
	} {
		r, err := Compute(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r.Layout != tc.layout || r.Raw != tc.raw*slot || r.Usable != tc.usable*slot || r.UsableData != tc.usableData*slot ||
			r.Promised != tc.promised*slot || r.Overcommit != tc.overcommit || len(r.Domains) != tc.domains || r.Domains[0].Usable != tc.firstUsable*slot {
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
	r, _ := Compute(out)
	if r.Allocated != 3*slot || r.Domains[1].Allocated != 3*slot {
		t.Errorf("allocated %d, domain h1 %+v: want the draining namespace's 3 slots", r.Allocated, r.Domains[1])
	}
}

// TestCheck: within the usable space nothing is said; past it a warning;
// past the limit an ErrOvercommitted refusal that says how to raise it.
func TestCheck(t *testing.T) {
	base := cluster([]int64{10, 10, 10}, nil) // 2+1: 10 segments, 20 data slots usable
	for _, tc := range []struct {
		size       int64
		warn, fail bool
	}{{20 * slot, false, false}, {30 * slot, true, false}, {41 * slot, false, true}} {
		v := Volume{Name: "v", Size: tc.size, K: 2, M: 1}
		in := base
		in.Volumes = []Volume{v}
		r, err := Compute(in)
		if err != nil {
			t.Fatal(err)
		}
		warn, err := Check(r, v, 2)
		if (warn != "") != tc.warn || (err != nil) != tc.fail {
			t.Errorf("size %d: warning %q, error %v", tc.size, warn, err)
		}
		if tc.warn && !strings.Contains(warn, "1.50 times the 30 MiB usable by 2+1 volumes across 3 failure domains") {
			t.Errorf("warning %q", warn)
		}
		if tc.fail && (!errors.Is(err, ErrOvercommitted) || !strings.Contains(err.Error(), "cluster set --max-overcommit")) {
			t.Errorf("refusal %v", err)
		}
	}
}

func TestMaxSegments(t *testing.T) {
	for _, tc := range []struct {
		slots []int64
		w     int
		want  int64
	}{
		{[]int64{10, 10, 10}, 3, 10}, {[]int64{10, 10}, 3, 0}, {[]int64{100, 1, 1}, 3, 1},
		{[]int64{20, 10, 10}, 3, 10}, {[]int64{5, 5, 5, 5}, 2, 10}, {nil, 1, 0},
	} {
		if got := maxSegments(tc.slots, tc.w); got != tc.want {
			t.Errorf("maxSegments(%v, %d) = %d, want %d", tc.slots, tc.w, got, tc.want)
		}
	}
}
