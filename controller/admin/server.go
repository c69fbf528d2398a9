package admin

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/nvstripe/nvstripe/meta"
)

// ServiceName is the gRPC service name (package nvstripe.controller.v1 of
// admin.proto).
const ServiceName = "nvstripe.controller.v1.Admin"

// NewServer returns the controller's admin API server: the admin operations
// on s, the standard health service (SERVING for "" and ServiceName) and
// server reflection.
func NewServer(s *meta.Store, opts ...grpc.ServerOption) *grpc.Server {
	srv := grpc.NewServer(opts...)
	RegisterAdminServer(srv, NewService(s))
	hs := health.NewServer()
	hs.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	return srv
}

// Client asks a controller's admin API.
type Client struct {
	cc  *grpc.ClientConn
	rpc AdminClient
}

var _ Ops = (*Client)(nil)

// Dial returns a client of the admin API at addr: a unix socket
// ("unix:PATH" or an absolute path) or TCP "HOST:PORT", which needs every
// file of tlsf (this client's certificate and key, and the CA of the
// controller's). It does not connect yet: the first call does.
func Dial(addr string, tlsf TLSFiles, opts ...grpc.DialOption) (*Client, error) {
	target, creds, err := dialCreds(addr, tlsf)
	if err != nil {
		return nil, fmt.Errorf("controller admin API %s: %w", addr, err)
	}
	cc, err := grpc.NewClient(target, append([]grpc.DialOption{creds}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("controller admin API %s: %w", addr, err)
	}
	return &Client{cc: cc, rpc: NewAdminClient(cc)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.cc.Close() }

// Conn is the client's connection, for the other services the controller
// offers (health, reflection).
func (c *Client) Conn() *grpc.ClientConn { return c.cc }

func call[Req, Rep any](ctx context.Context, fn func(context.Context, *Req, ...grpc.CallOption) (*Rep, error), req *Req) (*Rep, error) {
	rep, err := fn(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("controller admin API: %s", status.Convert(err).Message())
	}
	return rep, nil
}

// Status asks for the cluster's health.
func (c *Client) Status(ctx context.Context, req *StatusRequest) (*StatusReply, error) {
	return call(ctx, c.rpc.Status, req)
}

// Rebalance asks for a rebalance plan (and task, with req.Apply).
func (c *Client) Rebalance(ctx context.Context, req *RebalanceRequest) (*RebalanceReply, error) {
	return call(ctx, c.rpc.Rebalance, req)
}

// Drain asks to drain a namespace or host.
func (c *Client) Drain(ctx context.Context, req *DrainRequest) (*DrainReply, error) {
	return call(ctx, c.rpc.Drain, req)
}

// Fail asks to mark a namespace failed.
func (c *Client) Fail(ctx context.Context, req *FailRequest) (*FailReply, error) {
	return call(ctx, c.rpc.Fail, req)
}
