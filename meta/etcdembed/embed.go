// Package etcdembed runs an etcd server inside the process: the single-machine
// default of `nvstripe demo` and `nvstripe etcd`, and the server of tests.
// It is the only package besides metatest that links etcd's server.
//
// The server is a one-member cluster named by Options.Name. Every URL list
// (client and peer, listen and advertise) and the initial cluster are set
// explicitly, on free loopback ports unless given, so that several servers
// (parallel test packages) never collide on 2379/2380.
//
// Concurrency: a Server's methods are safe for concurrent use; Close is
// idempotent.
package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Options configure Start.
type Options struct {
	// Dir is the data directory. Required.
	Dir string
	// Name is the member name. Default "nvstripe".
	Name string
	// ClientAddr is the host:port clients connect to. A port of 0 picks a
	// free one. Default "127.0.0.1:0".
	ClientAddr string
	// PeerAddr is the host:port of the raft peer listener. Default
	// "127.0.0.1:0".
	PeerAddr string
	// Fast selects test timing: 10ms heartbeat, 100ms election, no fsync.
	// Never use it for data you want to keep. Default false.
	Fast bool
	// QuotaBytes is the backend size quota. Default 0: etcd's (2 GiB).
	QuotaBytes int64
	// CompactionRetention keeps this much history (periodic
	// auto-compaction). Default 5 minutes.
	CompactionRetention time.Duration
	// StartTimeout bounds waiting for the server to be ready. Default 60s.
	StartTimeout time.Duration
	// Logger receives the server's logs. Default: none.
	Logger *zap.Logger
	// ClientTLS, when set, serves clients over TLS (https:// endpoints).
	// Default nil: plain.
	ClientTLS *TLSFiles
}

// TLSFiles are the PEM files of a TLS client listener.
type TLSFiles struct {
	CertFile, KeyFile string
	// ClientCAFile, when set, makes every client present a certificate
	// signed by this CA.
	ClientCAFile string
}

// Server is a running embedded etcd.
type Server struct {
	e         *embed.Etcd
	endpoints []string
	once      sync.Once
}

// Start starts the server and waits until it serves clients.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Dir == "" {
		return nil, errors.New("embedded etcd: a data directory is required")
	}
	o.setDefaults()
	var lastErr error
	for range 3 { // a picked free port can be taken before etcd binds it
		s, err := start(ctx, o)
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			return s, err
		}
		lastErr = err
	}
	return nil, lastErr
}

func (o *Options) setDefaults() {
	if o.Name == "" {
		o.Name = "nvstripe"
	}
	if o.ClientAddr == "" {
		o.ClientAddr = "127.0.0.1:0"
	}
	if o.PeerAddr == "" {
		o.PeerAddr = "127.0.0.1:0"
	}
	if o.CompactionRetention == 0 {
		o.CompactionRetention = 5 * time.Minute
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

func start(ctx context.Context, o Options) (*Server, error) {
	client, err := resolve(o.ClientAddr)
	if err != nil {
		return nil, err
	}
	peer, err := resolve(o.PeerAddr)
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	if t := o.ClientTLS; t != nil {
		client.Scheme = "https"
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.ClientCAFile,
			ClientCertAuth: t.ClientCAFile != ""}
	}
	cfg.Name, cfg.Dir = o.Name, o.Dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = o.Name + "=" + peer.String()
	cfg.ListenMetricsUrls = nil
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = o.CompactionRetention.String()
	cfg.QuotaBackendBytes = o.QuotaBytes
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(o.Logger)
	if o.Fast {
		cfg.TickMs, cfg.ElectionMs, cfg.UnsafeNoFsync = 10, 100, true
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd in %s on %s: %w", o.Dir, client.Host, err)
	}
	timer := time.NewTimer(o.StartTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return &Server{e: e, endpoints: []string{client.String()}}, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s: %w", o.Dir, err)
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s not ready after %v", o.Dir, o.StartTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
}

// resolve turns host:port into an http URL, replacing port 0 by a free one.
func resolve(addr string) (url.URL, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return url.URL{}, fmt.Errorf("embedded etcd address %q: want HOST:PORT: %w", addr, err)
	}
	if port == "0" {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return url.URL{}, fmt.Errorf("find a free port on %s: %w", host, err)
		}
		addr = l.Addr().String()
		_ = l.Close()
	}
	return url.URL{Scheme: "http", Host: addr}, nil
}

// Endpoints returns the client URLs.
func (s *Server) Endpoints() []string { return s.endpoints }

// Err reports a fatal server error after start.
func (s *Server) Err() <-chan error { return s.e.Err() }

// Wait blocks until ctx ends (nil: a daemon interrupted) or the server
// fails.
func (s *Server) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-s.Err():
		return fmt.Errorf("etcd: %w", err)
	}
}

// Close stops the server and waits for it. It is safe to call more than once.
func (s *Server) Close() error {
	s.once.Do(s.e.Close)
	return nil
}
