package volume

import (
	"strconv"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/volume/layout"
)

// Regression cases: the step sequences of failures that the property tests
// once found (they were rapid .fail files), replayed by name on the same
// actions. A range "FIRST a|u BLOCKS" is propRange's draws: the first 4 KiB
// block, whether it is pulled back to a chunk boundary (a) or not (u), and
// the count of blocks. "recover" with nothing down and "fail" of a
// namespace already down do nothing, as in the property tests.

// TestRegressionAgainstModel replays TestPropertyAgainstModel failures;
// parity is checked after every step and the whole volume at the end.
func TestRegressionAgainstModel(t *testing.T) {
	for _, c := range []struct {
		name   string
		g      layout.Geometry // one of propLayouts
		shrink int64
		steps  string
	}{
		{"4+2 first partial write keeps parity", propLayouts[2], 0, "write 0 u 1"},
		{"2+1 write across a down namespace", propLayouts[1], 0, "fail 1; write 2 u 5"},
		{"4+2 repair with a second namespace down", propLayouts[2], 2,
			"flush; recover; write 3 a 16; read 93 a 1; zeroes 19 u 24; zeroes 5 a 22; fail 5; flush; fail 4; recover"},
		{"8+3 long run of failures, zeroes and trims", propLayouts[3], 1,
			"fail 6; flush; flush; read 1 a 11; zeroes 118 u 1; fail 1; read 2 u 1; flush; fail 7; write 84 u 1; " +
				"write 115 u 4; recover; read 69 u 4; fail 7; read 2 u 12; zeroes 61 a 10; fail 3; read 15 u 12; flush; " +
				"flush; read 4 u 16; zeroes 1 u 24; recover; zeroes 72 a 1; flush; read 38 u 14; read 4 u 21; fail 0; " +
				"trim 115 u 1; trim 1 a 12; flush; zeroes 24 a 5; recover; fail 3; zeroes 4 u 13; flush; read 115 a 4; " +
				"read 4 a 22; recover; read 3 a 13; recover; flush; recover; trim 19 a 2; flush; read 3 a 9; fail 3; " +
				"read 1 u 2; recover; recover; flush; flush; recover; zeroes 3 a 6; flush; flush; write 1 u 18; " +
				"read 16 a 16; recover; recover; write 1 u 23; read 31 u 8; recover; flush; zeroes 22 a 21; flush; " +
				"zeroes 3 a 20; flush; flush; fail 3; flush; zeroes 90 a 23; zeroes 22 u 5; zeroes 3 a 2; read 64 u 1; " +
				"trim 118 u 1; flush; flush; read 0 a 4; zeroes 24 a 8; recover; zeroes 1 u 17; fail 0; recover; " +
				"recover; flush; recover; write 3 u 15; zeroes 19 a 12; flush; zeroes 73 u 19; fail 9; trim 1 a 2; " +
				"flush; recover; write 14 u 14; flush; fail 4; read 114 u 3; trim 0 a 16"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newModelRig(t, c.g, 3*c.g.SegmentData()-4096*c.shrink)
			forSteps(t, c.g, c.steps, func(op string, off, n int64, arg int) {
				switch op {
				case "write", "read", "trim", "zeroes":
					map[string]func(tb, int64, int64){"write": m.write, "read": m.read, "trim": m.trim, "zeroes": m.zeroes}[op](t, off, n)
				case "flush":
					m.flush(t)
				case "fail":
					if len(m.down) < c.g.M {
						m.fail(arg)
					}
				case "recover":
					if len(m.down) > 0 {
						m.recover(t)
					}
				default:
					t.Fatalf("unknown step %q", op)
				}
				m.r.checkParity(t)
			})
			m.finalRead(t)
		})
	}
}

// TestRegressionCrash replays TestPropertyCrash failures; each ends with
// "crash SEED".
func TestRegressionCrash(t *testing.T) {
	for _, c := range []struct {
		name  string
		g     layout.Geometry
		steps string
	}{
		{"1+0 unflushed partial write", propLayouts[0], "write 0 u 1; crash 0"},
		{"8+3 clean after a partial write", propLayouts[3], "write 0 u 1; clean; crash 0"},
		{"4+2 trims and cleans", propLayouts[2],
			"clean; flush; clean; clean; write 48 u 5; clean; clean; flush; trim 38 a 2; trim 60 u 2; trim 1 u 46; " +
				"trim 31 a 1; trim 3 u 12; flush; clean; write 3 a 6; trim 1 a 40; write 36 u 7; clean; flush; clean; " +
				"write 63 u 1; write 39 u 4; trim 1 u 3; flush; clean; clean; flush; clean; flush; clean; clean; " +
				"trim 53 a 7; flush; flush; write 35 u 4; write 26 a 1; flush; trim 57 a 8; flush; clean; clean; flush; " +
				"crash -1606111"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newCrashRig(t, c.g)
			forSteps(t, c.g, c.steps, func(op string, off, n int64, arg int) {
				switch op {
				case "write":
					r.write(t, off, n)
				case "trim":
					r.trim(t, off, n)
				case "flush":
					r.flush(t)
				case "clean":
					r.clean(t)
				case "crash":
					r.crashAndCheck(t, int64(arg))
				default:
					t.Fatalf("unknown step %q", op)
				}
			})
		})
	}
}

// forSteps parses "op [args]; ..." and calls do for each step with the
// byte range of "FIRST a|u BLOCKS" or the single integer argument.
func forSteps(t *testing.T, g layout.Geometry, steps string, do func(op string, off, n int64, arg int)) {
	t.Helper()
	for i, step := range strings.Split(steps, ";") {
		f := strings.Fields(step)
		var nums []int64
		for _, a := range f[1:] {
			if a == "a" || a == "u" {
				continue
			}
			v, err := strconv.ParseInt(a, 10, 64)
			if err != nil {
				t.Fatalf("step %d %q: %v", i, step, err)
			}
			nums = append(nums, v)
		}
		switch len(nums) {
		case 0:
			do(f[0], 0, 0, 0)
		case 1:
			do(f[0], 0, 0, int(nums[0]))
		case 2:
			first := nums[0]
			if f[2] == "a" {
				first -= first % (g.Chunk / 4096)
			}
			do(f[0], first*4096, nums[1]*4096, 0)
		default:
			t.Fatalf("step %d %q: want OP, OP N or OP FIRST a|u BLOCKS", i, step)
		}
	}
}
