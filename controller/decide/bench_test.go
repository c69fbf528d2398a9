package decide

import (
	"fmt"
	"testing"

	"github.com/nvstripe/nvstripe/placement"
)

// benchState builds hosts hosts of one namespace each and segs 4+2
// segments placed round-robin, with namespace n0 failed.
func benchState(hosts, segs int) State {
	st := State{Volumes: []Volume{{ID: "v", K: 4, M: 2}}}
	for i := range hosts {
		h := fmt.Sprintf("h%d", i)
		st.Hosts = append(st.Hosts, Host{Name: h})
		st.Namespaces = append(st.Namespaces, Namespace{ID: fmt.Sprintf("n%d", i), Host: h, Capacity: int64(segs)})
	}
	for s := range segs {
		seg := Segment{ID: SegmentID{"v", int64(s)}}
		for j := range 6 {
			k := (s*7 + j) % hosts
			seg.Slots = append(seg.Slots, Slot{NS: st.Namespaces[k].ID, Slot: int64(s)})
			st.Namespaces[k].Used++
		}
		st.Segments = append(st.Segments, seg)
	}
	st.Namespaces[0].State = placement.StateFailed
	return st
}

// BenchmarkDecide_64hosts_100kSegments: one Decide over a cluster with one
// failed namespace (the default caps: 32 rebuilds emitted).
func BenchmarkDecide_64hosts_100kSegments(b *testing.B) {
	st := benchState(64, 100_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decide(st, t0, Config{}); err != nil {
			b.Fatal(err)
		}
	}
}
