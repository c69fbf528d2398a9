// Package pprofhttp serves Go's runtime profiles (net/http/pprof) for the
// daemons' --pprof flag: `go tool pprof http://ADDR/debug/pprof/profile`
// profiles a running target, map, agent, controller or CSI driver.
//
// The listener must be a loopback address unless the operator says
// otherwise (--pprof-any): the endpoints have no authentication, a profile
// costs CPU to take (a denial of service from anyone who can connect), and
// goroutine dumps and the command line show what the process holds. Reach
// a remote node's profiles through an SSH tunnel instead.
//
// Start serves on its own mux, never on http.DefaultServeMux (where the
// net/http/pprof import also registers its handlers; no daemon serves that
// mux). A Server is safe for concurrent use; Close is idempotent.
package pprofhttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"sync"
	"time"

	"github.com/spf13/pflag"
)

// ErrNotLoopback is the class of the error for a --pprof address that is
// not a loopback address (without --pprof-any).
var ErrNotLoopback = errors.New("not a loopback address")

// Flags are --pprof and --pprof-any.
type Flags struct {
	// Addr is --pprof HOST:PORT; "" (the default) serves nothing. Port 0
	// picks a free port (the log line says which).
	Addr string
	// Any is --pprof-any: allow an Addr that is not loopback.
	Any bool
}

// AddFlags defines the flags on fl.
func (f *Flags) AddFlags(fl *pflag.FlagSet) {
	fl.StringVar(&f.Addr, "pprof", "", "serve Go's runtime profiles (net/http/pprof) on this loopback HOST:PORT, e.g. 127.0.0.1:6060 (default off)")
	fl.BoolVar(&f.Any, "pprof-any", false, "allow --pprof on an address that is not loopback (the profiles have no authentication)")
}

// CheckAddr says whether addr may serve profiles: a HOST:PORT whose host
// is a loopback IP or a name that resolves only to loopback IPs, unless
// any. An empty host (all interfaces) is not loopback.
func CheckAddr(ctx context.Context, addr string, any bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--pprof %q: want HOST:PORT: %w", addr, err)
	}
	if any {
		return nil
	}
	if err := loopbackHost(ctx, host); err != nil {
		return fmt.Errorf("--pprof %s: %w: the profiles have no authentication and cost CPU to take; "+
			"use 127.0.0.1:PORT (reach it through an SSH tunnel), or add --pprof-any to serve them there anyway", addr, err)
	}
	return nil
}

// loopbackHost fails unless host is a loopback IP or resolves only to
// loopback IPs.
func loopbackHost(ctx context.Context, host string) error {
	if host == "" {
		return fmt.Errorf("%w (no host means every interface)", ErrNotLoopback)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if !ip.IsLoopback() {
			return ErrNotLoopback
		}
		return nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", host, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf("%w (%s resolves to %s)", ErrNotLoopback, host, ip)
		}
	}
	return nil
}

// Server is a running profile endpoint.
type Server struct {
	ln    net.Listener
	srv   *http.Server
	close sync.Once
	err   error
}

// Start listens on f.Addr (checked with CheckAddr) and serves the
// profiles until Close. It returns nil, nil when f.Addr is "".
func Start(ctx context.Context, f Flags) (*Server, error) {
	if f.Addr == "" {
		return nil, nil
	}
	if err := CheckAddr(ctx, f.Addr, f.Any); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", f.Addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof: %w", err)
	}
	s := &Server{ln: ln, srv: &http.Server{Handler: Handler(), ReadHeaderTimeout: 10 * time.Second}}
	go s.srv.Serve(ln)
	return s, nil
}

// Addr is the address the server listens on (its port chosen when the
// flag said 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops serving; a profile being taken is cut off.
func (s *Server) Close() error {
	s.close.Do(func() { s.err = s.srv.Close() })
	return s.err
}

// Handler serves net/http/pprof's pages under /debug/pprof/.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
