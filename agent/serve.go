package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/internal/metricshttp"
)

// Defaults of `nvstripe agent`.
const (
	DefaultSocket      = "/run/nvstripe/agent.sock"
	DefaultStateDir    = "/var/lib/nvstripe/agent"
	DefaultMetricsAddr = "127.0.0.1:9475"
)

// ServeOptions configure Serve: an Agent plus its gRPC socket and metrics
// listener.
type ServeOptions struct {
	Options
	// Socket is the unix socket of the gRPC API (mode 0600: mapping a
	// volume is a privileged act). Required. A stale socket file (nobody
	// listening) is replaced; a live one is an error.
	Socket string
	// MetricsAddr is the HOST:PORT of the Prometheus HTTP listener
	// (GET /metrics). Default "": no listener.
	MetricsAddr string
	// ShutdownTimeout bounds waiting for API calls in progress at shutdown.
	// Default 10s.
	ShutdownTimeout time.Duration
	// Ready, when set, is called once the API and metrics are served.
	Ready func(a *Agent, metricsAddr string)
}

// Serve runs an agent until ctx ends: it restores the recorded mappings,
// serves the gRPC API on Socket and metrics on MetricsAddr, then shuts down:
// API first, then every mapping (kept recorded for the next start).
func Serve(ctx context.Context, o ServeOptions) error {
	if o.Socket == "" {
		return fmt.Errorf("agent: a socket path is required: %w", api.ErrInvalid)
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 10 * time.Second
	}
	l, err := listenSocket(o.Socket)
	if err != nil {
		return err
	}
	a, err := New(ctx, o.Options)
	if err != nil {
		l.Close()
		return err
	}
	gs := api.NewServer(rpc{a: a})
	go gs.Serve(l)
	hs, maddr, err := serveMetrics(a, o.MetricsAddr)
	if err == nil {
		if o.Ready != nil {
			o.Ready(a, maddr)
		}
		<-ctx.Done()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ShutdownTimeout)
	defer cancel()
	stopGRPC(sctx, gs)
	if hs != nil {
		err = errors.Join(err, hs.Shutdown(sctx))
	}
	return errors.Join(err, a.Close(sctx))
}

// listenSocket listens on a unix socket path, replacing a stale socket file.
func listenSocket(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	removeStaleSocket(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("agent socket (is another agent running?): %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	return l, nil
}

// serveMetrics serves GET /metrics on addr ("" for none) and records the
// bound address in a's status.
func serveMetrics(a *Agent, addr string) (*metricshttp.Server, string, error) {
	if addr == "" {
		return nil, "", nil
	}
	hs, err := metricshttp.Serve(addr, a.metrics.Registry())
	if err != nil {
		return nil, "", err
	}
	a.mu.Lock()
	a.metricsAddr = hs.Addr()
	a.mu.Unlock()
	return hs, hs.Addr(), nil
}

// stopGRPC lets calls in progress finish until ctx ends, then cuts them.
func stopGRPC(ctx context.Context, gs interface {
	GracefulStop()
	Stop()
}) {
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		gs.Stop()
		<-done
	}
}
