package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/agent/api"
)

// endingFront is a frontend that stops by itself when end is closed, as a
// kernel device disconnected by someone else does.
type endingFront struct{ end chan struct{} }

func (f endingFront) url() string            { return "/dev/nbd7" }
func (f endingFront) where() string          { return "/dev/nbd7" }
func (f endingFront) close() error           { return nil }
func (f endingFront) ended() <-chan struct{} { return f.end }
func (f endingFront) resize(int64) error     { return nil }

// TestWaitLostDetached: WaitLost keeps waiting while the frontend serves and
// returns ErrDetached, naming the device, once it stopped by itself.
func TestWaitLostDetached(t *testing.T) {
	f := endingFront{end: make(chan struct{})}
	a := &Agent{maps: map[string]*mapping{"v": {name: "v", front: f}}}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := a.WaitLost(ctx, "v"); err != nil {
		t.Fatalf("WaitLost while the device serves: %v", err)
	}
	close(f.end)
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := a.WaitLost(ctx, "v") // nil, had it waited out the context
	if !errors.Is(err, ErrDetached) || !strings.Contains(err.Error(), "/dev/nbd7") {
		t.Errorf("WaitLost once the device was detached: %v, want ErrDetached naming /dev/nbd7", err)
	}
}

// TestHealth: what ls shows per mapping state, frontend and down namespaces.
func TestHealth(t *testing.T) {
	live, gone := endingFront{end: make(chan struct{})}, endingFront{end: make(chan struct{})}
	close(gone.end)
	for _, c := range []struct {
		state string
		front frontend
		down  []string
		want  string
	}{
		{api.StateServing, live, nil, api.HealthOK},
		{api.StateServing, &nbdListener{}, nil, api.HealthOK},
		{api.StateServing, live, []string{"h1-n1"}, api.HealthDegraded},
		{api.StateServing, gone, []string{"h1-n1"}, api.HealthDetached},
		{api.StateFenced, live, nil, api.HealthFenced},
		{api.StateRetrying, nil, nil, ""},
	} {
		mp := &mapping{state: c.state, front: c.front}
		if got := mp.healthLocked(c.down); got != c.want {
			t.Errorf("%s, down %v, front ended %v: health %q, want %q", c.state, c.down, c.front != nil && isClosed(c.front.ended()), got, c.want)
		}
	}
}
