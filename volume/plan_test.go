package volume

import (
	"fmt"
	"slices"
	"testing"

	"github.com/nvstripe/nvstripe/volume/layout"
)

func usableExcept(n int, missing ...int) []bool {
	u := make([]bool, n)
	for i := range u {
		u[i] = !slices.Contains(missing, i)
	}
	return u
}

// TestPlanWrite pins the planner's choices: mode, reads and writes per case.
func TestPlanWrite(t *testing.T) {
	g := layout.Geometry{K: 4, M: 2, Chunk: 64 << 10, SlotSize: 1 << 20}
	g8 := layout.Geometry{K: 8, M: 2, Chunk: 64 << 10, SlotSize: 1 << 20}
	g40 := layout.Geometry{K: 4, M: 0, Chunk: 64 << 10, SlotSize: 1 << 20}
	one := func(g layout.Geometry, off, n int64) layout.StripeIO { return g.Split(off, n)[0] }
	cases := []struct {
		name    string
		g       layout.Geometry
		sio     layout.StripeIO
		missing []int
		want    string // mode reads writes skip
	}{
		{"full stripe", g, one(g, 0, 256<<10), nil, "full [] [0 1 2 3 4 5] []"},
		{"4KiB in one chunk: delta", g, one(g, 4096, 4096), nil, "delta [0 4 5] [0 4 5] []"},
		{"3 of 4 chunks: reconstruct-write", g, one(g, 0, 192<<10), nil, "reconstruct-write [3] [0 1 2 4 5] []"},
		{"2 of 8 chunks: delta", g8, one(g8, 0, 128<<10), nil, "delta [0 1 8 9] [0 1 8 9] []"},
		{"7 of 8 chunks: reconstruct-write", g8, one(g8, 0, 448<<10), nil, "reconstruct-write [7] [0 1 2 3 4 5 6 8 9] []"},
		{"parity missing: delta skips it", g, one(g, 4096, 4096), []int{5}, "delta [0 4] [0 4] [5]"},
		{"written shard missing: rebuild", g, one(g, 4096, 4096), []int{0}, "rebuild [1 2 3 4] [4 5] [0]"},
		{"other data missing: delta", g, one(g, 4096, 4096), []int{2, 3}, "delta [0 4 5] [0 4 5] []"},
		{"full stripe degraded", g, one(g, 0, 256<<10), []int{1, 4}, "full [] [0 2 3 5] [1 4]"},
		{"all parity missing: data only", g, one(g, 4096, 4096), []int{4, 5}, "data-only [] [0] [4 5]"},
		{"plain striping", g40, one(g40, 65536, 8192), nil, "data-only [] [1] []"},
	}
	for _, c := range cases {
		p, ok := planWrite(c.g, c.sio, usableExcept(c.g.N(), c.missing...))
		if !ok {
			t.Errorf("%s: refused", c.name)
			continue
		}
		got := fmt.Sprintf("%s %v %v %v", p.Mode, p.Reads, p.Writes, p.Skip)
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	if _, ok := planWrite(g, one(g, 0, 4096), usableExcept(6, 0, 1, 2)); ok {
		t.Error("planned a write with 3 of 6 shards missing")
	}
}
