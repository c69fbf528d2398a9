package volclient

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// lines collects log lines and path states, safe for concurrent use.
type lines struct {
	mu     sync.Mutex
	logs   []string
	states []PathState
}

func (l *lines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.logs = append(l.logs, fmt.Sprintf(format, args...))
}

func (l *lines) state(p PathState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.states = append(l.states, p)
}

func (l *lines) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.logs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// waitPathState waits until the namespace record says want for its path.
func waitPathState(t *testing.T, s *meta.Store, id, want string) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		rec, err := s.Namespace(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got = rec.Paths[0].ANAState; got == want {
			return
		}
	}
	t.Fatalf("namespace %s path state %q, want %q", id, got, want)
}

// TestPathStatePublished: the ANA state a node sees on a namespace's path
// reaches the namespace record (what `ns ls` shows) and the OnPathState
// hook; a path turning inaccessible is a warning, and losing the last path
// is logged as an error.
func TestPathStatePublished(t *testing.T) {
	ctx := context.Background()
	s, _, tgt, rec := newServedNamespace(t)
	addr := rec.Paths[0].Addr
	if err := s.SetPathState(ctx, rec.ID, addr, 0, meta.ANAUnknown); err != nil {
		t.Fatal(err)
	}
	var l lines
	n, err := NewNamespaces(ctx, s, NamespaceOptions{PathStateInterval: 20 * time.Millisecond, Logf: l.logf, OnPathState: l.state})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.Device(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	waitPathState(t, s, rec.ID, meta.ANAOptimized)
	if err := tgt.SetANAState(0, 1, pdu.ANAInaccessible); err != nil {
		t.Fatal(err)
	}
	waitPathState(t, s, rec.ID, meta.ANAInaccessible)
	for deadline := time.Now().Add(10 * time.Second); !l.has("every path lost") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{"[WARN] namespace " + rec.ID + ": path " + addr + " optimized -> inaccessible",
		"[ERR] namespace " + rec.ID + ": every path lost"} {
		if !l.has(want) {
			t.Errorf("no log line %q in %q", want, l.logs)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.states) < 2 || l.states[0] != (PathState{rec.ID, addr, meta.ANAOptimized}) || l.states[len(l.states)-1].State != meta.ANAInaccessible {
		t.Errorf("OnPathState heard %+v", l.states)
	}
	if rec2, _ := s.Namespace(ctx, rec.ID); rec2.Paths[0].ANAGroup != rec.Paths[0].ANAGroup {
		t.Errorf("ANA group %d, was %d", rec2.Paths[0].ANAGroup, rec.Paths[0].ANAGroup)
	}
}
