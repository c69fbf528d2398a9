package decide

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/placement"
)

// small returns a valid State: 4 hosts, one 2+1 segment, a failed namespace.
func small() State {
	st := State{Volumes: []Volume{{ID: "v", K: 2, M: 1}}}
	for i := 1; i <= 4; i++ {
		h := fmt.Sprintf("h%d", i)
		st.Hosts = append(st.Hosts, Host{Name: h})
		st.Namespaces = append(st.Namespaces, Namespace{ID: fmt.Sprintf("n%d", i), Host: h, Capacity: 4})
	}
	st.Segments = []Segment{{ID: SegmentID{"v", 0}, Slots: []Slot{{"n1", 0}, {"n2", 0}, {"n3", 0}}}}
	for i := range 3 {
		st.Namespaces[i].Used = 1
	}
	st.Namespaces[0].State = placement.StateFailed
	return st
}

func TestDecideErrors(t *testing.T) {
	cases := map[string]func(*State, *Config){
		"duplicate namespace": func(s *State, _ *Config) { s.Namespaces = append(s.Namespaces, s.Namespaces[0]) },
		"unknown host":        func(s *State, _ *Config) { s.Namespaces[0].Host = "nope" },
		"used over capacity":  func(s *State, _ *Config) { s.Namespaces[1].Used = 9 },
		"unknown volume":      func(s *State, _ *Config) { s.Segments[0].ID.Volume = "w" },
		"shard count":         func(s *State, _ *Config) { s.Segments[0].Slots = s.Segments[0].Slots[:2] },
		"duplicate segment":   func(s *State, _ *Config) { s.Segments = append(s.Segments, s.Segments[0]) },
		"bad layout":          func(s *State, _ *Config) { s.Volumes[0].K = 0 },
		"duplicate volume":    func(s *State, _ *Config) { s.Volumes = append(s.Volumes, s.Volumes[0]) },
		"move shard range": func(s *State, _ *Config) {
			s.Segments[0].Move = &Move{Shard: 3, To: Slot{"n4", 0}}
		},
		"move kind":          func(s *State, _ *Config) { s.Segments[0].Move = &Move{Kind: 9, To: Slot{"n4", 0}} },
		"negative threshold": func(s *State, _ *Config) { s.Tasks = []Task{{ID: "t", Threshold: -1}} },
		"NaN threshold":      func(s *State, _ *Config) { s.Tasks = []Task{{ID: "t", Threshold: math.NaN()}} },
		"duplicate task":     func(s *State, _ *Config) { s.Tasks = []Task{{ID: "t"}, {ID: "t"}} },
		"task kind":          func(s *State, _ *Config) { s.Tasks = []Task{{ID: "t", Kind: 5}} },
		"negative cap":       func(_ *State, c *Config) { c.MaxMovesPerNS = -1 },
	}
	for name, mutate := range cases {
		st, cfg := small(), Config{}
		mutate(&st, &cfg)
		acts, err := Decide(st, t0, cfg)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Decide = %v, %v; want ErrInvalid", name, acts, err)
		}
	}
	if _, err := Decide(small(), t0, Config{}); err != nil {
		t.Fatalf("valid state: %v", err)
	}
}

func TestDecideDoesNotModifyState(t *testing.T) {
	st := small()
	st.Segments = append(st.Segments, Segment{ID: SegmentID{"v", 1}, Slots: []Slot{{"n2", 1}, {"n3", 1}, {"n4", 0}},
		Move: &Move{Shard: 0, To: Slot{"n1", 1}}})
	st.Namespaces[1].Used, st.Namespaces[2].Used, st.Namespaces[3].Used = 2, 2, 1
	before := deepCopy(st)
	acts, err := Decide(st, t0, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st, before) {
		t.Errorf("Decide modified its State")
	}
	want := "[abort v/1 shard 0 -> n1 (destination failed) rebuild v/0 shard 0 n1 -> n4]"
	if fmt.Sprint(acts) != want {
		t.Errorf("got %v, want %s", acts, want)
	}
}

func deepCopy(st State) State {
	c := st
	c.Namespaces = append([]Namespace(nil), st.Namespaces...)
	c.Segments = nil
	for _, s := range st.Segments {
		s.Slots = append([]Slot(nil), s.Slots...)
		if s.Move != nil {
			m := *s.Move
			s.Move = &m
		}
		c.Segments = append(c.Segments, s)
	}
	return c
}

// TestDecideRandom checks the invariants and the order independence on
// random clusters in random states.
func TestDecideRandom(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 42))
		st, cfg := randomState(t, r)
		now := t0.Add(time.Duration(r.IntN(30)) * time.Minute)
		acts, err := Decide(st, now, cfg)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		pos := fmt.Sprintf("seed %d", seed)
		checkInvariants(t, pos, st, now, cfg, acts)
		checkShuffled(t, pos, st, now, cfg, acts)
	}
}

func randomState(t *testing.T, r *rand.Rand) (State, Config) {
	cfg := Config{MaxMoves: 1 + r.IntN(8), MaxMovesPerNS: 1 + r.IntN(3)}
	var st State
	nHosts := 4 + r.IntN(10)
	if r.IntN(2) == 0 {
		cfg.DomainLabel = "rack"
	}
	for i := range nHosts {
		h := Host{Name: fmt.Sprintf("h%d", i), Labels: map[string]string{"rack": fmt.Sprintf("r%d", r.IntN(nHosts))}}
		st.Hosts = append(st.Hosts, h)
		for j := range 1 + r.IntN(2) {
			st.Namespaces = append(st.Namespaces, Namespace{ID: fmt.Sprintf("n%d.%d", i, j), Host: h.Name, Capacity: int64(5 + r.IntN(20))})
		}
	}
	layouts := [][2]int{{2, 1}, {4, 2}, {3, 2}, {1, 1}}
	for v := range 1 + r.IntN(3) {
		l := layouts[r.IntN(len(layouts))]
		st.Volumes = append(st.Volumes, Volume{ID: fmt.Sprintf("v%d", v), K: l[0], M: l[1], AllowSharedDomains: r.IntN(3) == 0})
	}
	placeSegments(t, r, &st, cfg)
	states := []placement.State{placement.StateIn, placement.StateIn, placement.StateIn, placement.StateDraining,
		placement.StateDown, placement.StateOut, placement.StateFailed}
	for i := range st.Namespaces {
		st.Namespaces[i].State = states[r.IntN(len(states))]
		st.Namespaces[i].Since = t0.Add(-time.Duration(r.IntN(20)) * time.Minute)
	}
	if r.IntN(3) == 0 {
		st.Tasks = []Task{{ID: "t", Threshold: r.Float64() / 4}}
	}
	return st, cfg
}

// placeSegments places random segments with placement on an all-in
// cluster, and gives some a move in flight.
func placeSegments(t *testing.T, r *rand.Rand, st *State, cfg Config) {
	idx := map[string]int{}
	for i, n := range st.Namespaces {
		idx[n.ID] = i
	}
	for k := range r.IntN(30) {
		v := st.Volumes[r.IntN(len(st.Volumes))]
		c, err := placement.NewCluster(toPlacement(st))
		if err != nil {
			t.Fatal(err)
		}
		ids, err := placement.PlanSegment(c, v.K+v.M+1, placement.Options{Seed: uint64(k), AllowSharedDomains: true})
		if err != nil {
			return // full
		}
		s := Segment{ID: SegmentID{v.ID, int64(k)}}
		for _, id := range ids[:v.K+v.M] {
			s.Slots = append(s.Slots, Slot{NS: id})
			st.Namespaces[idx[id]].Used++
		}
		if r.IntN(4) == 0 {
			to := ids[v.K+v.M]
			s.Move = &Move{Shard: r.IntN(v.K + v.M), Kind: MoveKind(r.IntN(3)), To: Slot{NS: to}, Started: t0.Add(-time.Duration(r.IntN(20)) * time.Minute)}
			st.Namespaces[idx[to]].Used++
		}
		st.Segments = append(st.Segments, s)
	}
}

func toPlacement(st *State) ([]placement.Host, []placement.Namespace, string) {
	var hs []placement.Host
	for _, h := range st.Hosts {
		hs = append(hs, placement.Host{Name: h.Name, Labels: h.Labels})
	}
	var ns []placement.Namespace
	for _, n := range st.Namespaces {
		ns = append(ns, placement.Namespace{ID: n.ID, Host: n.Host, Capacity: n.Capacity, Used: n.Used})
	}
	return hs, ns, ""
}
