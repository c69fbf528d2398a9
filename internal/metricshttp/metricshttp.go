// Package metricshttp is the one Prometheus endpoint of the daemons (agent,
// foreground map, controller, target): GET /metrics of a registry on a TCP
// listener, with a bound on how long a client may take to send its request
// headers. It serves no profiles (pprofhttp does, on loopback only). A
// Server is safe for concurrent use.
package metricshttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Path is where the metrics are served.
const Path = "/metrics"

// readHeaderTimeout bounds a client that opens a connection and sends its
// headers slowly (or never).
const readHeaderTimeout = 10 * time.Second

// Server serves a registry's metrics until it is closed.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// Handler serves reg in Prometheus's text and protobuf formats, counting
// its own errors and requests in reg.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// Serve serves GET /metrics of reg on addr (HOST:PORT; port 0 picks one).
func Serve(addr string, reg *prometheus.Registry) (*Server, error) {
	if addr == "" {
		return nil, errors.New("metrics: empty listen address")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+Path, Handler(reg))
	s := &Server{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout}}
	go s.srv.Serve(ln)
	return s, nil
}

// Addr is the bound HOST:PORT.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the metrics' URL.
func (s *Server) URL() string { return "http://" + s.Addr() + Path }

// Shutdown stops listening and waits for requests in progress until ctx
// ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// Close stops listening and cuts requests in progress.
func (s *Server) Close() error { return s.srv.Close() }
