package api

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// ServiceName is the gRPC service name (package nvstripe.agent.v1 of
// agent.proto).
const ServiceName = "nvstripe.agent.v1.Agent"

// NewServer returns a gRPC server offering impl, the standard health service
// (grpc.health.v1.Health: SERVING for "" and ServiceName) and server
// reflection (so that grpcurl lists and describes the API). Serve it on a
// unix-socket listener. impl embeds UnimplementedAgentServer.
func NewServer(impl AgentServer, opts ...grpc.ServerOption) *grpc.Server {
	s := grpc.NewServer(opts...)
	RegisterAgentServer(s, impl)
	hs := health.NewServer()
	hs.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	reflection.Register(s)
	return s
}
