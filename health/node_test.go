package health

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// eventLog collects the events one node reports.
type eventLog struct {
	mu     sync.Mutex
	events []Member
}

func (l *eventLog) add(m Member) {
	l.mu.Lock()
	l.events = append(l.events, m)
	l.mu.Unlock()
}

// saw reports whether some event named name with status st.
func (l *eventLog) saw(name string, st Status) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.events, func(m Member) bool { return m.Name == name && m.Status == st })
}

// sawAt reports whether some event named name at address addr had status st.
func (l *eventLog) sawAt(name string, st Status, addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.events, func(m Member) bool { return m.Name == name && m.Status == st && m.Addr == addr })
}

// waitFor is testutil.WaitFor under this package's old name.
var waitFor = testutil.WaitFor

// testLogf is testutil.Logf under this package's old name.
var testLogf = testutil.Logf

func startNodes(t *testing.T, n int) ([]*Node, []*eventLog) {
	t.Helper()
	logf := testLogf(t)
	nodes, logs := make([]*Node, n), make([]*eventLog, n)
	for i := range n {
		logs[i] = &eventLog{}
		host := fmt.Sprintf("h%d", i+1)
		node, err := Start(Config{
			Meta:    Meta{Role: RoleTarget, Host: host, Labels: map[string]string{"rack": "r1"}, Namespaces: []string{host + "-n1"}},
			Profile: ProfileTest, OnEvent: logs[i].add, Logf: logf,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = node.Shutdown() })
		nodes[i] = node
	}
	for _, node := range nodes[1:] {
		if _, err := node.Join([]string{nodes[0].Addr()}); err != nil {
			t.Fatal(err)
		}
	}
	for i, node := range nodes {
		waitFor(t, fmt.Sprintf("node %d to see %d members", i, n), func() bool { return len(node.Members()) == n })
	}
	return nodes, logs
}

func TestNodesSeeDeathAndLeave(t *testing.T) {
	nodes, logs := startNodes(t, 3)
	ms := nodes[0].Members()
	if ms[1].Name != "h2" || ms[1].Meta.Host != "h2" || ms[1].Meta.Labels["rack"] != "r1" ||
		!slices.Equal(ms[1].Meta.Namespaces, []string{"h2-n1"}) || ms[1].Status != StatusAlive {
		t.Fatalf("h1's view of h2: %+v", ms[1])
	}
	if err := nodes[2].Shutdown(); err != nil { // silent stop: the others must declare it dead
		t.Fatal(err)
	}
	for i := range 2 {
		waitFor(t, fmt.Sprintf("h%d to see h3 dead", i+1), func() bool { return logs[i].saw("h3", StatusDead) })
		waitFor(t, fmt.Sprintf("h%d to drop h3", i+1), func() bool { return len(nodes[i].Members()) == 2 })
	}
	if err := nodes[1].Leave(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "h1 to see h2 gone", func() bool { return logs[0].saw("h2", StatusDead) && len(nodes[0].Members()) == 1 })
	if err := nodes[2].Leave(time.Second); !errors.Is(err, errShutdown) {
		t.Errorf("Leave after Shutdown = %v", err)
	}
}

func TestNodeSetMeta(t *testing.T) {
	nodes, logs := startNodes(t, 2)
	m := Meta{Role: RoleTarget, Host: "h2", Namespaces: []string{"h2-n1", "h2-n2"}}
	if err := nodes[1].SetMeta(m, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "h1 to see h2's new namespaces", func() bool {
		ms := nodes[0].Members()
		return len(ms) == 2 && slices.Equal(ms[1].Meta.Namespaces, m.Namespaces)
	})
	if !logs[0].saw("h2", StatusAlive) {
		t.Error("no alive event for h2 on h1")
	}
	big := Meta{Role: RoleTarget, Host: "h2", Namespaces: make([]string, MaxMetaSize)}
	if err := nodes[1].SetMeta(big, time.Second); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetMeta(oversized) = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, c := range map[string]Config{
		"no host": {Meta: Meta{Role: RoleTarget}},
		"no role": {Meta: Meta{Host: "h"}},
		"port":    {Meta: Meta{Role: RoleTarget, Host: "h"}, BindPort: 70000},
		"addr":    {Meta: Meta{Role: RoleTarget, Host: "h"}, BindAddr: "localhost"},
		"profile": {Meta: Meta{Role: RoleTarget, Host: "h"}, Profile: 9},
	} {
		if _, err := Start(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Start = %v, want ErrInvalid", name, err)
		}
	}
	c := Config{Meta: Meta{Role: RoleAgent, Host: "h"}}
	c.EnsureDefaults()
	if c.Name != "h/agent" || c.BindAddr != "127.0.0.1" || c.BindPort != 0 {
		t.Errorf("defaults: %+v", c)
	}
}

// TestRestartedMemberRejoinsAtNewAddress: a member that dies and comes
// back under its name on another port is taken back as soon as its old
// incarnation is dead, not refused as a conflicting address until the dead
// entry is reaped (meanwhile the pool would judge a serving target down).
func TestRestartedMemberRejoinsAtNewAddress(t *testing.T) {
	var seen testutil.Buffer // safe for memberlist's goroutines after the test
	watcher := &eventLog{}
	start := func(host string, log func(string, ...any), ev func(Member)) *Node {
		node, err := Start(Config{Meta: Meta{Role: RoleTarget, Host: host}, Profile: ProfileTest, OnEvent: ev, Logf: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = node.Shutdown() })
		return node
	}
	h1 := start("h1", seen.Logf, watcher.add)
	old := start("h2", testLogf(t), nil)
	if _, err := old.Join([]string{h1.Addr()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "h1 to see h2", func() bool { return len(h1.Members()) == 2 })
	oldAddr := old.Addr()
	if err := old.Shutdown(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "h1 to see h2 dead", func() bool { return watcher.saw(old.Name(), StatusDead) && len(h1.Members()) == 1 })
	restarted := start("h2", testLogf(t), nil)
	if restarted.Addr() == oldAddr {
		t.Fatalf("the restarted member got its old address %s again; the test needs another", oldAddr)
	}
	if _, err := restarted.Join([]string{h1.Addr()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "h1 to see h2 alive at its new address", func() bool {
		return slices.ContainsFunc(h1.Members(), func(m Member) bool { return m.Name == restarted.Name() && m.Addr == restarted.Addr() })
	})
	if strings.Contains(seen.String(), "onflicting address") {
		t.Errorf("h1 refused the restarted h2 as a conflicting address before taking it back")
	}

	// A late alive message for h2 from another address (an old incarnation
	// still gossiped, or a stray process under its name) must not take the
	// name from the member alive at its new address: memberlist lets a new
	// address replace a dead or left member only, whatever the message's
	// incarnation. (While h2 is dead a stale message could still move it,
	// as memberlist always allowed once a dead member is reaped: probes of
	// that address fail and the member is dead again.)
	stray := start("h2", testLogf(t), nil)
	if _, err := stray.Join([]string{h1.Addr()}); err == nil {
		t.Log("the stray h2 reached h1")
	}
	waitFor(t, "h1 to refuse the stray h2", func() bool { return strings.Contains(seen.String(), "onflicting address") })
	if !slices.ContainsFunc(h1.Members(), func(m Member) bool { return m.Name == restarted.Name() && m.Addr == restarted.Addr() }) {
		t.Errorf("h1 moved h2 away from its live address %s after a stray alive message: %+v", restarted.Addr(), h1.Members())
	}
	if watcher.sawAt(restarted.Name(), StatusDead, restarted.Addr()) {
		t.Errorf("h1 judged the live h2 dead after a stray alive message")
	}
}
