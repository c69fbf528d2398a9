package volume

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/nvstripe/nvstripe/volume/layout"
)

// TestPlanRead runs testdata/read_plan.txt: each case is
//
//	plan k=K m=M off=BYTES len=BYTES [missing=(S,...)]
//
// over 64 KiB chunks, a read of the first stripe it touches, with the listed
// shards (stripe positions: 0..K-1 data, K.. parity) not usable. It prints
// the plan: "direct", "reconstruct span [lo,hi) read [...] rebuild [...]
// spare [...]",
// or "unreadable" when planRead refuses.
func TestPlanRead(t *testing.T) {
	datadriven.RunTest(t, "testdata/read_plan.txt", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "plan" {
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
		var k, m int
		var off, n int64
		d.ScanArgs(t, "k", &k)
		d.ScanArgs(t, "m", &m)
		d.ScanArgs(t, "off", &off)
		d.ScanArgs(t, "len", &n)
		g := layout.Geometry{K: k, M: m, Chunk: 64 << 10, SlotSize: 1 << 20}
		if err := g.Validate(); err != nil {
			d.Fatalf(t, "%v", err)
		}
		var missing []int
		if d.HasArg("missing") {
			for _, a := range d.CmdArgs {
				if a.Key != "missing" {
					continue
				}
				for _, v := range a.Vals {
					sh, err := strconv.Atoi(v)
					if err != nil {
						d.Fatalf(t, "missing=%q: %v", v, err)
					}
					missing = append(missing, sh)
				}
			}
		}
		p, ok := planRead(g, g.Split(off, n)[0], usableExcept(g.N(), missing...))
		return formatReadPlan(p, ok)
	})
}

func formatReadPlan(p readPlan, ok bool) string {
	switch {
	case !ok:
		return "unreadable\n"
	case p.Mode == readDirect:
		if p.Reads != nil || p.Rebuild != nil {
			return fmt.Sprintf("direct, but carries reads %v rebuild %v\n", p.Reads, p.Rebuild)
		}
		return "direct\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s span [%d,%d) read %v rebuild %v spare %v\n", p.Mode, p.Lo, p.Hi, p.Reads, p.Rebuild, p.Spare)
	return b.String()
}
