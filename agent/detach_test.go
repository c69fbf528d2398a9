package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// endingFront is a frontend that stops by itself when end is closed, as a
// kernel device disconnected by someone else does.
type endingFront struct{ end chan struct{} }

func (f endingFront) url() string            { return "/dev/nbd7" }
func (f endingFront) where() string          { return "/dev/nbd7" }
func (f endingFront) close() error           { return nil }
func (f endingFront) ended() <-chan struct{} { return f.end }

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
