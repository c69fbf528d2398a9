package health

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// runTracker plays a script against a Tracker and returns what every tick
// reported. Lines: "AT alive|suspect|dead NODE", "AT ioerr NS",
// "AT clear NS", "AT tick". AT is a duration since t0. Every node serves
// namespaces NODE-a and NODE-b.
func runTracker(t *testing.T, cfg TrackerConfig, script []string) []string {
	t.Helper()
	tr, err := NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range script {
		f := strings.Fields(line)
		d, err := time.ParseDuration(f[0])
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		now := t0.Add(d)
		switch f[1] {
		case "tick":
			for _, x := range tr.Tick(now) {
				out = append(out, fmt.Sprintf("%v %s %s->%s %v", x.At.Sub(t0), x.Node, x.From, x.To, x.Namespaces))
			}
		case "ioerr":
			tr.ReportIOError(f[2], now)
		case "clear":
			tr.ClearFailed(f[2], now)
		default:
			st := map[string]Status{"alive": StatusAlive, "suspect": StatusSuspect, "dead": StatusDead}[f[1]]
			if st == 0 {
				t.Fatalf("bad line %q", line)
			}
			meta := Meta{Role: RoleTarget, Host: f[2], Namespaces: []string{f[2] + "-a", f[2] + "-b"}}
			tr.Observe(Member{Name: f[2], Status: st, Meta: meta}, now)
		}
	}
	return out
}

func TestTracker(t *testing.T) {
	fast := TrackerConfig{Grace: 5 * time.Second, OutAfter: time.Minute, FlapLimit: 3, FlapWindow: 10 * time.Minute, StableFor: 2 * time.Minute}
	cases := []struct {
		name   string
		script []string
		want   []string
	}{{
		name:   "new alive host is reported up",
		script: []string{"0s alive h1", "0s tick", "10s tick"},
		want:   []string{"0s h1 unknown->up [h1-a h1-b]"},
	}, {
		name:   "silent past grace goes down, then out",
		script: []string{"0s alive h1", "0s tick", "10s dead h1", "14s tick", "15s tick", "74s tick", "75s tick"},
		want:   []string{"0s h1 unknown->up [h1-a h1-b]", "15s h1 up->down [h1-a h1-b]", "1m15s h1 down->out [h1-a h1-b]"},
	}, {
		name:   "a late tick reports every step with its own time",
		script: []string{"0s alive h1", "10s dead h1", "1h tick"},
		want:   []string{"0s h1 unknown->up [h1-a h1-b]", "15s h1 up->down [h1-a h1-b]", "1m15s h1 down->out [h1-a h1-b]"},
	}, {
		name:   "silence shorter than grace is no transition",
		script: []string{"0s alive h1", "0s tick", "10s dead h1", "12s alive h1", "20s tick"},
		want:   []string{"0s h1 unknown->up [h1-a h1-b]"},
	}, {
		name:   "suspect changes nothing",
		script: []string{"0s alive h1", "0s tick", "10s suspect h1", "1h tick"},
		want:   []string{"0s h1 unknown->up [h1-a h1-b]"},
	}, {
		name:   "expected host never seen alive goes down after grace",
		script: []string{"0s dead h1", "4s tick", "5s tick"},
		want:   []string{"5s h1 unknown->down [h1-a h1-b]"},
	}, {
		name:   "down host that returns is up at once",
		script: []string{"0s alive h1", "10s dead h1", "20s tick", "30s alive h1", "30s tick", "5m tick"},
		want:   []string{"0s h1 unknown->up [h1-a h1-b]", "15s h1 up->down [h1-a h1-b]", "30s h1 down->up [h1-a h1-b]"},
	}, {
		name:   "out host that returns (not flapping) is up at once",
		script: []string{"0s alive h1", "10s dead h1", "2m tick", "3m alive h1", "3m tick"},
		want: []string{"0s h1 unknown->up [h1-a h1-b]", "15s h1 up->down [h1-a h1-b]", "1m15s h1 down->out [h1-a h1-b]",
			"3m0s h1 out->up [h1-a h1-b]"},
	}, {
		name: "flapping host is held down, goes out once, and comes back only when stable",
		script: []string{"0s alive h1", "0s tick",
			"10s dead h1", "20s tick", "25s alive h1", "25s tick", // silence 1: down, up
			"30s dead h1", "40s tick", "45s alive h1", "45s tick", // silence 2: down, up
			"50s dead h1", "60s tick", "65s alive h1", "65s tick", // silence 3: down, held
			"70s dead h1", "80s alive h1", "90s tick", // still held; out clock from 55s
			"115s tick", "116s tick", // out at 1m55s
			"3m tick", "3m20s tick", "3m21s dead h1", "3m22s alive h1", // up due 80s+2m=3m20s
			"4m tick"},
		want: []string{"0s h1 unknown->up [h1-a h1-b]",
			"15s h1 up->down [h1-a h1-b]", "25s h1 down->up [h1-a h1-b]",
			"35s h1 up->down [h1-a h1-b]", "45s h1 down->up [h1-a h1-b]",
			"55s h1 up->down [h1-a h1-b]",
			"1m55s h1 down->out [h1-a h1-b]",
			"3m20s h1 out->up [h1-a h1-b]"},
	}, {
		name:   "flap count ages out of the window",
		script: []string{"0s alive h1", "1s dead h1", "2s alive h1", "3s dead h1", "4s alive h1", "20m dead h1", "21m alive h1", "21m tick"},
		want:   []string{"0s h1 unknown->up [h1-a h1-b]", "20m5s h1 up->down [h1-a h1-b]", "21m0s h1 down->up [h1-a h1-b]"},
	}, {
		name: "io error fails one namespace at once and it stays failed",
		script: []string{"0s alive h1", "0s tick", "5s ioerr h1-b", "5s ioerr h1-b", "5s tick",
			"10s dead h1", "20s tick", "30s alive h1", "30s tick", "40s clear h1-b", "50s dead h1", "1m tick"},
		want: []string{"0s h1 unknown->up [h1-a h1-b]", "5s h1 up->failed [h1-b]",
			"15s h1 up->down [h1-a]", "30s h1 down->up [h1-a]", "55s h1 up->down [h1-a h1-b]"},
	}, {
		name:   "io error on an unknown namespace is still reported",
		script: []string{"0s ioerr zz", "0s tick"},
		want:   []string{"0s  unknown->failed [zz]"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := runTracker(t, fast, c.script)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
		})
	}
}

func TestTrackerHosts(t *testing.T) {
	tr, err := NewTracker(TrackerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"b", "a"} {
		tr.Observe(Member{Name: n, Status: StatusAlive, Meta: Meta{Role: RoleTarget, Host: n}}, t0)
	}
	got := tr.Tick(t0)
	if len(got) != 2 || got[0].Node != "a" || got[1].Node != "b" {
		t.Fatalf("want a then b up, got %v", got)
	}
	if s, ok := tr.State("a"); !ok || s != StateUp {
		t.Errorf("State(a) = %v %v", s, ok)
	}
	tr.Forget("a")
	if _, ok := tr.State("a"); ok {
		t.Error("a still tracked after Forget")
	}
	if tr.Flapping("b", t0) {
		t.Error("b flapping with no silences")
	}
}

func TestTrackerConfig(t *testing.T) {
	if _, err := NewTracker(TrackerConfig{Grace: -1}); err == nil {
		t.Error("negative grace accepted")
	}
	var c TrackerConfig
	c.EnsureDefaults()
	if c.Grace != 5*time.Second || c.OutAfter != 10*time.Minute || c.FlapLimit != 3 || c.FlapWindow != 10*time.Minute || c.StableFor != 2*time.Minute {
		t.Errorf("defaults %+v", c)
	}
}

// TestTrackerTickIndependent checks rule "transitions do not depend on
// when Tick is called": random event scripts give the same transitions
// whether ticked after every event or once at the end.
func TestTrackerTickIndependent(t *testing.T) {
	cfg := TrackerConfig{Grace: 5 * time.Second, OutAfter: time.Minute, FlapLimit: 2, FlapWindow: 5 * time.Minute, StableFor: 30 * time.Second}
	ops := []string{"alive", "dead", "dead", "suspect", "alive", "ioerr", "clear"}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		var script, ticked []string
		at := time.Duration(0)
		for range 30 {
			at += time.Duration(1+r.IntN(90)) * time.Second // events at one instant may straddle ticks
			node := fmt.Sprintf("h%d", r.IntN(3))
			op := ops[r.IntN(len(ops))]
			if op == "ioerr" || op == "clear" {
				node += "-a"
			}
			line := fmt.Sprintf("%v %s %s", at, op, node)
			script = append(script, line)
			ticked = append(ticked, line, fmt.Sprintf("%v tick", at))
		}
		end := fmt.Sprintf("%v tick", at+time.Hour)
		once := runTracker(t, cfg, append(script, end))
		often := runTracker(t, cfg, append(ticked, end))
		if strings.Join(once, "\n") != strings.Join(often, "\n") {
			t.Fatalf("seed %d: ticked once:\n%s\nticked often:\n%s", seed, strings.Join(once, "\n"), strings.Join(often, "\n"))
		}
	}
}
