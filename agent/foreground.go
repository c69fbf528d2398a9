package agent

import (
	"context"
	"errors"
	"time"

	"github.com/nvstripe/nvstripe/meta"
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
	// ListDir is where the mapping registers itself while it serves: the
	// API's List, Status and Unmap on MapSocket(ListDir, volume), which
	// `nvstripe ls` and `nvstripe unmap` use. Default "": not registered.
	ListDir string
	// MetricsAddr is the HOST:PORT of a Prometheus listener (GET /metrics)
	// with the mapping's metrics, as the agent has; Status names it (so
	// `nvstripe top` finds it). Default "": none.
	MetricsAddr string
}

// ServeForeground maps spec with an agent of its own, serves it until ctx
// ends, an unmap request arrives on its socket in ListDir, or the mapping
// is lost (Agent.WaitLost: fenced for good, or its kernel device detached
// by someone else), then unmaps it, flushing the volume, detaching its
// device and releasing its lease; an unmap request is answered after that.
func ServeForeground(ctx context.Context, spec Spec, o ForegroundOptions) error {
	if o.Agent.Holder == "" {
		o.Agent.Holder = meta.DefaultHolder("map")
	}
	ag, err := New(ctx, o.Agent)
	if err != nil {
		return err
	}
	hs, _, err := serveMetrics(ag, o.MetricsAddr)
	if err != nil {
		ag.Close(context.WithoutCancel(ctx))
		return err
	}
	if hs != nil {
		defer hs.Close()
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
	var c *control
	var reply chan error
	unmapped := false
	unmapping := func() {
		if o.Unmapping != nil {
			o.Unmapping(m.Url)
		}
	}
	if err == nil {
		c = startControl(ag, o.ListDir, spec.Volume)
		if o.Serving != nil {
			o.Serving(m.Url)
		}
		reply, unmapped, err = c.wait(ctx, unmapping)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if !unmapped {
		unmapping()
		err = errors.Join(err, ag.Unmap(sctx, spec.Volume))
	}
	err = errors.Join(err, ag.Close(sctx))
	c.finish(reply, err)
	return err
}

// ErrTLSNotExport is CheckForeground's refusal of NBD TLS for a frontend
// other than an NBD export (kernel nbd devices have no TLS).
var ErrTLSNotExport = errors.New("--tls is for --nbd-listen exports (kernel nbd devices have no TLS)")

// CheckForeground checks, before the store is opened or a lease taken,
// that this machine can serve spec in the foreground with o: CheckSpec;
// for a kernel nbd device, that it is free to attach (nbd.CheckAttachable);
// NBD TLS only for an NBD export (else ErrTLSNotExport, an operator's
// mistake).
func CheckForeground(spec Spec, o Options) error {
	if err := CheckSpec(spec); err != nil {
		return err
	}
	if spec.Via == ViaNBDDevice {
		if err := nbd.CheckAttachable(spec.Where, spec.Volume); err != nil {
			return err
		}
	}
	if o.NBDTLS != nil && spec.Via != ViaNBDListen {
		return ErrTLSNotExport
	}
	return o.Namespaces.Check()
}
