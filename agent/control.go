package agent

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"

	"github.com/nvstripe/nvstripe/agent/api"
)

// control is the socket a foreground map registers itself on, in the
// directory `nvstripe ls` and `nvstripe unmap` read (MapSocket): the
// socket is the mapping's runtime record, live while the process serves.
// It answers List and Status, and Unmap of its volume, which it hands to
// the loop of ServeForeground: that process flushes, detaches and releases
// the lease itself, then answers. A record whose process died refuses
// connections; readers remove it.
type control struct {
	api.UnimplementedAgentServer
	a      *Agent
	volume string
	sock   string          // "" when not registered
	gs     *grpc.Server    // nil when not registered
	unmaps chan chan error // unmap requests, each with where to answer
	closed chan struct{}   // closed once the process stops taking requests
}

// startControl registers the foreground map of volume on
// MapSocket(dir, volume); dir "" registers nothing. A socket that cannot be
// served is only logged: the mapping works without it, but ls and unmap do
// not find it.
func startControl(a *Agent, dir, volume string) *control {
	c := &control{a: a, volume: volume, unmaps: make(chan chan error), closed: make(chan struct{})}
	if dir == "" {
		return c
	}
	sock := MapSocket(dir, volume)
	l, err := listenSocket(sock)
	if err != nil {
		a.logf("map: not registered for nvstripe ls and unmap: %v", err)
		return c
	}
	c.sock, c.gs = sock, api.NewServer(c)
	go c.gs.Serve(l)
	return c
}

// wait serves until ctx ends (nil), the mapping is lost (why) or an
// unmap request unmapped it (unmapped; reply is where to answer, once the
// lease is released). A request the agent refuses (a device in use) is
// answered at once and the mapping goes on. unmapping is called before an
// unmap that a request asked for.
func (c *control) wait(ctx context.Context, unmapping func()) (reply chan error, unmapped bool, err error) {
	defer close(c.closed)
	for {
		wctx, cancel := context.WithCancel(ctx)
		lost := make(chan error, 1)
		go func() { lost <- c.a.WaitLost(wctx, c.volume) }()
		select {
		case err := <-lost:
			cancel()
			return nil, false, err
		case reply = <-c.unmaps:
		}
		cancel()
		if err := <-lost; err != nil {
			return reply, false, err
		}
		unmapping()
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		err := c.a.Unmap(uctx, c.volume)
		cancel()
		if err == nil || !c.a.mapped(c.volume) {
			return reply, true, err
		}
		c.a.logf("unmap %s refused: %v", c.volume, err)
		reply <- err
	}
}

// finish (nil: none started) removes the record, answers the unmap request that ended the
// mapping (reply, nil when none did) with err and stops serving.
func (c *control) finish(reply chan error, err error) {
	if c == nil {
		return
	}
	if c.sock != "" {
		os.Remove(c.sock)
	}
	if reply != nil {
		reply <- err
	}
	if c.gs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stopGRPC(ctx, c.gs)
	}
}

func (c *control) List(context.Context, *api.ListRequest) (*api.ListReply, error) {
	return &api.ListReply{Mappings: c.a.List()}, nil
}

func (c *control) Status(context.Context, *api.StatusRequest) (*api.StatusReply, error) {
	return c.a.Status(), nil
}

// Unmap asks the foreground map to unmap its volume and waits until it
// has: flushed, detached and released the lease, or refused (a device in
// use stays mapped).
func (c *control) Unmap(ctx context.Context, req *api.UnmapRequest) (*api.UnmapReply, error) {
	if req.Volume != c.volume {
		return nil, api.Status(fmt.Errorf("volume %s is not mapped by this process (it serves %s): %w", req.Volume, c.volume, api.ErrNotFound))
	}
	reply := make(chan error, 1)
	select {
	case c.unmaps <- reply:
	case <-c.closed:
		return nil, api.Status(fmt.Errorf("volume %s: its map process is stopping already: %w", c.volume, api.ErrBusy))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case err := <-reply:
		if err != nil {
			return nil, api.Status(classify(err))
		}
		return &api.UnmapReply{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
