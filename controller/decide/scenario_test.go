package decide

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/placement"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestScenarios runs testdata/*.txt. Commands (times are durations since
// t0):
//
//	config [out-after=D] [max-moves=N] [per-ns=N] [stall-after=D] [domain=LABEL]
//	host add NAME [LABEL=VALUE...]
//	ns add ID host=H slots=N [state=S] [at=D]
//	cluster hosts=N slots=N [racks=R]   hosts hI (rack=rI%R), one namespace nI each
//	vol add ID k=K m=M [shared]
//	segment add VOL/IDX slots=NS[:SLOT],...
//	segments vol=V count=N               placed by placement.PlanSegment
//	ns set ID state=S [at=D]
//	task add ID threshold=F              a rebalance task
//	decide now=D [apply]                 prints the Actions; apply plays a runner
//	commit SEG|all                       the mover finished: commit the move
//	progress SEG at=D                    the mover reported progress
//	health alive|dead HOST at=D          a gossip event for host HOST
//	health ioerr NS at=D
//	health tick now=D                    prints tracker transitions and applies them
//	state                                prints namespaces and segments
//
// After every decide the harness checks Decide's invariants and that
// shuffling the State's slices does not change the result.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			e := newEnv(t)
			runScript(t, f, e.do)
		})
	}
}

// env is a scenario's world: the State Decide sees, a health Tracker, and
// a runner played by apply and commit.
type env struct {
	t       *testing.T
	cfg     Config
	st      State
	tracker *health.Tracker
	next    map[string]int64 // next free slot number per namespace
}

func newEnv(t *testing.T) *env {
	tr, err := health.NewTracker(health.TrackerConfig{Grace: 10 * time.Second, OutAfter: 10 * time.Minute,
		FlapLimit: 3, FlapWindow: 30 * time.Minute, StableFor: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, tracker: tr, next: map[string]int64{}}
}

func (e *env) do(c command) string {
	defer func() {
		if r := recover(); r != nil {
			e.t.Fatalf("%s: %s: %v", c.pos, c.line, r)
		}
	}()
	key := c.name
	if len(c.args) > 0 && (c.name == "host" || c.name == "ns" || c.name == "vol" || c.name == "segment" || c.name == "task" || c.name == "health") {
		key += " " + c.args[0]
	}
	switch key {
	case "config":
		return e.config(c)
	case "host add":
		return e.hostAdd(c)
	case "ns add":
		return e.nsAdd(c)
	case "cluster":
		return e.cluster(c)
	case "vol add":
		return e.volAdd(c)
	case "segment add":
		return e.segmentAdd(c)
	case "segments":
		return e.segments(c)
	case "ns set":
		return e.nsSet(c)
	case "task add":
		e.st.Tasks = append(e.st.Tasks, Task{ID: c.args[1], Kind: TaskRebalance, Threshold: e.float(c, "threshold")})
		return ""
	case "decide":
		return e.decide(c)
	case "commit":
		return e.commit(c)
	case "progress":
		e.seg(c.args[0]).Move.Updated = e.at(c, "at")
		return ""
	case "health alive", "health dead", "health ioerr", "health tick":
		return e.health(c)
	case "state":
		return e.dump()
	}
	panic("unknown command")
}

// Argument helpers; a bad argument panics, which do turns into a failure.

func (e *env) at(c command, key string) time.Time {
	if !c.has(key) {
		return t0
	}
	d, err := time.ParseDuration(c.kv[key])
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", key, c.kv[key], err))
	}
	return t0.Add(d)
}

func (e *env) int(c command, key string) int64 {
	n, err := strconv.ParseInt(c.kv[key], 10, 64)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", key, c.kv[key], err))
	}
	return n
}

func (e *env) float(c command, key string) float64 {
	f, err := strconv.ParseFloat(c.kv[key], 64)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", key, c.kv[key], err))
	}
	return f
}

func (e *env) config(c command) string {
	for k := range c.kv {
		switch k {
		case "out-after":
			e.cfg.OutAfter = e.at(c, k).Sub(t0)
		case "stall-after":
			e.cfg.StallAfter = e.at(c, k).Sub(t0)
		case "max-moves":
			e.cfg.MaxMoves = int(e.int(c, k))
		case "per-ns":
			e.cfg.MaxMovesPerNS = int(e.int(c, k))
		case "domain":
			e.cfg.DomainLabel = c.kv[k]
		case "min-up":
			e.cfg.MinUpFraction = e.float(c, k)
		default:
			panic("unknown config key " + k)
		}
	}
	return ""
}

func (e *env) hostAdd(c command) string {
	e.st.Hosts = append(e.st.Hosts, Host{Name: c.args[1], Labels: c.kv})
	return ""
}

func (e *env) nsAdd(c command) string {
	n := Namespace{ID: c.args[1], Host: c.kv["host"], Capacity: e.int(c, "slots")}
	if c.has("state") {
		st, err := placement.ParseState(c.kv["state"])
		if err != nil {
			panic(err)
		}
		n.State, n.Since = st, e.at(c, "at")
	}
	e.st.Namespaces = append(e.st.Namespaces, n)
	return ""
}

func (e *env) cluster(c command) string {
	racks := int64(0)
	if c.has("racks") {
		racks = e.int(c, "racks")
	}
	for i := range e.int(c, "hosts") {
		h := Host{Name: fmt.Sprintf("h%d", i+1)}
		if racks > 0 {
			h.Labels = map[string]string{"rack": fmt.Sprintf("r%d", i%racks+1)}
		}
		e.st.Hosts = append(e.st.Hosts, h)
		e.st.Namespaces = append(e.st.Namespaces, Namespace{ID: fmt.Sprintf("n%d", i+1), Host: h.Name, Capacity: e.int(c, "slots")})
	}
	return ""
}

func (e *env) volAdd(c command) string {
	e.st.Volumes = append(e.st.Volumes, Volume{ID: c.args[1], K: int(e.int(c, "k")), M: int(e.int(c, "m")), AllowSharedDomains: slices.Contains(c.args, "shared")})
	return ""
}

func parseSegID(s string) SegmentID {
	vol, idx, ok := strings.Cut(s, "/")
	n, err := strconv.ParseInt(idx, 10, 64)
	if !ok || err != nil {
		panic("bad segment id " + s)
	}
	return SegmentID{Volume: vol, Index: n}
}

func (e *env) segmentAdd(c command) string {
	s := Segment{ID: parseSegID(c.args[1])}
	for _, f := range strings.Split(c.kv["slots"], ",") {
		ns, slot, ok := strings.Cut(f, ":")
		sl := Slot{NS: ns, Slot: e.next[ns]}
		if ok {
			sl.Slot, _ = strconv.ParseInt(slot, 10, 64)
		}
		e.next[ns] = max(e.next[ns], sl.Slot+1)
		e.ns(ns).Used++
		s.Slots = append(s.Slots, sl)
	}
	e.st.Segments = append(e.st.Segments, s)
	return ""
}

func (e *env) segments(c command) string {
	vol := e.vol(c.kv["vol"])
	start := int64(len(e.st.Segments))
	for i := range e.int(c, "count") {
		hosts := make([]placement.Host, 0, len(e.st.Hosts))
		for _, h := range e.st.Hosts {
			hosts = append(hosts, placement.Host{Name: h.Name, Labels: h.Labels})
		}
		var nss []placement.Namespace
		for _, n := range e.st.Namespaces {
			nss = append(nss, placement.Namespace{ID: n.ID, Host: n.Host, State: n.State, Capacity: n.Capacity, Used: n.Used})
		}
		cl, err := placement.NewCluster(hosts, nss, e.cfg.DomainLabel)
		if err != nil {
			panic(err)
		}
		ids, err := placement.PlanSegment(cl, vol.K+vol.M, placement.Options{Seed: placement.SegmentSeed(vol.ID, start+i)})
		if err != nil {
			panic(err)
		}
		e.segmentAdd(command{name: "segment", args: []string{"add", fmt.Sprintf("%s/%d", vol.ID, start+i)},
			kv: map[string]string{"slots": strings.Join(ids, ",")}})
	}
	return ""
}

func (e *env) nsSet(c command) string {
	st, err := placement.ParseState(c.kv["state"])
	if err != nil {
		panic(err)
	}
	n := e.ns(c.args[1])
	n.State = st
	if c.has("at") {
		n.Since = e.at(c, "at")
	}
	return ""
}

func (e *env) ns(id string) *Namespace {
	for i := range e.st.Namespaces {
		if e.st.Namespaces[i].ID == id {
			return &e.st.Namespaces[i]
		}
	}
	panic("unknown namespace " + id)
}

func (e *env) vol(id string) Volume {
	for _, v := range e.st.Volumes {
		if v.ID == id {
			return v
		}
	}
	panic("unknown volume " + id)
}

func (e *env) seg(id string) *Segment {
	want := parseSegID(id)
	for i := range e.st.Segments {
		if e.st.Segments[i].ID == want {
			return &e.st.Segments[i]
		}
	}
	panic("unknown segment " + id)
}

func (e *env) decide(c command) string {
	now := e.at(c, "now")
	acts, err := Decide(e.st, now, e.cfg)
	if err != nil {
		return "error: " + err.Error()
	}
	checkInvariants(e.t, c.pos, e.st, now, e.cfg, acts)
	checkShuffled(e.t, c.pos, e.st, now, e.cfg, acts)
	var b strings.Builder
	for _, a := range acts {
		fmt.Fprintln(&b, a)
		if c.has("apply") || slices.Contains(c.args, "apply") {
			e.apply(a, now)
		}
	}
	if len(acts) == 0 {
		return "(no actions)"
	}
	return b.String()
}

// apply plays the runner for one Action.
func (e *env) apply(a Action, now time.Time) {
	switch a := a.(type) {
	case MarkOut:
		e.ns(a.NS).State, e.ns(a.NS).Since = placement.StateOut, now
	case MarkDrained:
		e.ns(a.NS).State = placement.StateDrained
	case RebuildShard:
		e.startMove(a.Segment, a.Shard, MoveRebuild, a.To, now)
	case MoveShard:
		e.startMove(a.Segment, a.Shard, a.Kind, a.To, now)
	case AbortMove:
		s := e.seg(a.Segment.String())
		e.ns(s.Move.To.NS).Used--
		s.Move = nil
	case FinishTask:
		e.st.Tasks = slices.DeleteFunc(e.st.Tasks, func(t Task) bool { return t.ID == a.Task })
	}
}

func (e *env) startMove(id SegmentID, shard int, kind MoveKind, to string, now time.Time) {
	s := e.seg(id.String())
	s.Move = &Move{Shard: shard, Kind: kind, To: Slot{NS: to, Slot: e.next[to]}, Started: now, Total: 1 << 30}
	e.next[to]++
	e.ns(to).Used++
}

func (e *env) commit(c command) string {
	var b strings.Builder
	for i := range e.st.Segments {
		s := &e.st.Segments[i]
		if s.Move == nil || (c.args[0] != "all" && c.args[0] != s.ID.String()) {
			continue
		}
		old := s.Slots[s.Move.Shard]
		fmt.Fprintf(&b, "committed %v shard %d %s -> %s\n", s.ID, s.Move.Shard, old.NS, s.Move.To.NS)
		for j := range e.st.Namespaces {
			if e.st.Namespaces[j].ID == old.NS {
				e.st.Namespaces[j].Used--
			}
		}
		s.Slots[s.Move.Shard], s.Move = s.Move.To, nil
	}
	if b.Len() == 0 {
		return "(nothing to commit)"
	}
	return b.String()
}

func (e *env) health(c command) string {
	switch c.args[0] {
	case "tick":
		return e.healthTick(e.at(c, "now"))
	case "ioerr":
		e.tracker.ReportIOError(c.args[1], e.at(c, "at"))
		return ""
	}
	st := health.StatusAlive
	if c.args[0] == "dead" {
		st = health.StatusDead
	}
	var nss []string
	for _, n := range e.st.Namespaces {
		if n.Host == c.args[1] {
			nss = append(nss, n.ID)
		}
	}
	meta := health.Meta{Role: health.RoleTarget, Host: c.args[1], Namespaces: nss}
	e.tracker.Observe(health.Member{Name: c.args[1], Status: st, Meta: meta}, e.at(c, "at"))
	return ""
}

// healthTick prints the tracker's transitions and writes them into the
// namespace states, as a runner would: up -> in, down, out, failed.
func (e *env) healthTick(now time.Time) string {
	var b strings.Builder
	for _, tr := range e.tracker.Tick(now) {
		fmt.Fprintf(&b, "%v: %s %s -> %s %v\n", tr.At.Sub(t0), tr.Node, tr.From, tr.To, tr.Namespaces)
		to := map[health.HostState]placement.State{health.StateUp: placement.StateIn, health.StateDown: placement.StateDown,
			health.StateOut: placement.StateOut, health.StateFailed: placement.StateFailed}[tr.To]
		for _, ns := range tr.Namespaces {
			if n := e.ns(ns); n.State != to {
				n.State, n.Since = to, tr.At
			}
		}
	}
	if b.Len() == 0 {
		return "(no transitions)"
	}
	return b.String()
}

func (e *env) dump() string {
	var b strings.Builder
	nss := slices.Clone(e.st.Namespaces)
	slices.SortFunc(nss, func(a, b Namespace) int { return strings.Compare(a.ID, b.ID) })
	for _, n := range nss {
		fmt.Fprintf(&b, "ns %s host=%s %s used=%d/%d\n", n.ID, n.Host, n.State, n.Used, n.Capacity)
	}
	for _, s := range e.st.Segments {
		var sl []string
		for _, x := range s.Slots {
			sl = append(sl, fmt.Sprintf("%s:%d", x.NS, x.Slot))
		}
		fmt.Fprintf(&b, "seg %v %s", s.ID, strings.Join(sl, ","))
		if m := s.Move; m != nil {
			fmt.Fprintf(&b, " move shard %d -> %s:%d (%v, started %v)", m.Shard, m.To.NS, m.To.Slot, m.Kind, m.Started.Sub(t0))
		}
		b.WriteString("\n")
	}
	for _, t := range e.st.Tasks {
		fmt.Fprintf(&b, "task %s rebalance threshold=%g\n", t.ID, t.Threshold)
	}
	return b.String()
}

// checkShuffled checks rule "whatever the order of State's slices".
func checkShuffled(t *testing.T, pos string, st State, now time.Time, cfg Config, want []Action) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(now.Unix()), 7))
	sh := State{Hosts: slices.Clone(st.Hosts), Namespaces: slices.Clone(st.Namespaces), Volumes: slices.Clone(st.Volumes),
		Segments: slices.Clone(st.Segments), Tasks: slices.Clone(st.Tasks)}
	r.Shuffle(len(sh.Hosts), func(i, j int) { sh.Hosts[i], sh.Hosts[j] = sh.Hosts[j], sh.Hosts[i] })
	r.Shuffle(len(sh.Namespaces), func(i, j int) { sh.Namespaces[i], sh.Namespaces[j] = sh.Namespaces[j], sh.Namespaces[i] })
	r.Shuffle(len(sh.Segments), func(i, j int) { sh.Segments[i], sh.Segments[j] = sh.Segments[j], sh.Segments[i] })
	r.Shuffle(len(sh.Tasks), func(i, j int) { sh.Tasks[i], sh.Tasks[j] = sh.Tasks[j], sh.Tasks[i] })
	got, err := Decide(sh, now, cfg)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: shuffled State gave %v, %v; want %v", pos, got, err, want)
	}
}
