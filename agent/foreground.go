package agent

import (
	"context"
	"errors"
	"time"

	"github.com/nvstripe/nvstripe/nbd"
)

// ForegroundOptions say how ServeForeground serves one volume.
type ForegroundOptions struct {
	// Agent configures the agent that owns the volume. Holder defaults
	// to map.HOSTNAME (meta.DefaultHolder("map")).
	Agent Options
	// WaitSize, for a kernel nbd device, waits (up to 30s) until the
	// kernel reports its size before Serving is called.
	WaitSize bool
	// Serving is called with the mapping's URL once it serves; Unmapping
	// when it stops.
	Serving, Unmapping func(url string)
	// ListDir is where the mapping is listed for `nvstripe ls` while it
	// serves: the API's List and Status on MapSocket(ListDir, volume).
	// Default "": not listed.
	ListDir string
}

// ServeForeground maps spec with an agent of its own, serves it until ctx
// ends or the mapping is lost (Agent.WaitLost: fenced for good, or its
// kernel device detached by someone else), then unmaps it, flushing the
// volume and releasing its lease.
func ServeForeground(ctx context.Context, spec Spec, o ForegroundOptions) error {
	ag, err := New(ctx, o.Agent)
	if err != nil {
		return err
	}
	m, err := ag.Map(ctx, spec)
	if err != nil {
		ag.Close(context.WithoutCancel(ctx))
		return err
	}
	if spec.Via == ViaNBDDevice && o.WaitSize {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = nbd.WaitSize(wctx, m.Url)
		cancel()
	}
	if err == nil {
		stopList := func() {}
		if o.ListDir != "" {
			stopList = serveList(ag, MapSocket(o.ListDir, spec.Volume))
		}
		if o.Serving != nil {
			o.Serving(m.Url)
		}
		err = ag.WaitLost(ctx, spec.Volume)
		stopList()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if o.Unmapping != nil {
		o.Unmapping(m.Url)
	}
	return errors.Join(err, ag.Unmap(sctx, spec.Volume), ag.Close(sctx))
}
