// Package rpctest checks the standard services that every gRPC server of
// nvstripe offers beside its own API (the agent's, the controller's admin
// API): server reflection (grpc.reflection.v1, what grpcurl uses) and health
// (grpc.health.v1). It is a client of both, for tests.
//
// Concurrency: the functions are safe for concurrent use; each opens its own
// stream or call.
package rpctest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
)

// Services lists the services the server on cc names through reflection.
func Services(ctx context.Context, cc grpc.ClientConnInterface) ([]string, error) {
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("reflection: %w", err)
	}
	defer stream.CloseSend()
	req := &reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}
	if err := stream.Send(req); err != nil {
		return nil, fmt.Errorf("reflection: sending list_services: %w", err)
	}
	rep, err := stream.Recv()
	if err != nil {
		return nil, fmt.Errorf("reflection: list_services: %w", err)
	}
	list := rep.GetListServicesResponse()
	if list == nil {
		return nil, fmt.Errorf("reflection: list_services answered %v", rep.GetErrorResponse())
	}
	var names []string
	for _, s := range list.GetService() {
		names = append(names, s.GetName())
	}
	return names, nil
}

// Describe returns how many schema files reflection returns for symbol (a
// service or message name): the schema a grpcurl `describe` prints.
func Describe(ctx context.Context, cc grpc.ClientConnInterface, symbol string) (int, error) {
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		return 0, fmt.Errorf("reflection: %w", err)
	}
	defer stream.CloseSend()
	req := &reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: symbol}}
	if err := stream.Send(req); err != nil {
		return 0, fmt.Errorf("reflection: sending file_containing_symbol: %w", err)
	}
	rep, err := stream.Recv()
	if err != nil {
		return 0, fmt.Errorf("reflection: file_containing_symbol %s: %w", symbol, err)
	}
	if e := rep.GetErrorResponse(); e != nil {
		return 0, fmt.Errorf("reflection: file_containing_symbol %s: %s", symbol, e.GetErrorMessage())
	}
	return len(rep.GetFileDescriptorResponse().GetFileDescriptorProto()), nil
}

// CheckStandard fails t unless the server on cc lists service, the health
// and reflection services through reflection, describes service, and
// answers SERVING for service and for the server as a whole ("").
func CheckStandard(t testing.TB, cc grpc.ClientConnInterface, service string) {
	t.Helper()
	ctx := t.Context()
	names, err := Services(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{service, healthpb.Health_ServiceDesc.ServiceName, reflectionpb.ServerReflection_ServiceDesc.ServiceName} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v: %s missing", names, want)
		}
	}
	if n, err := Describe(ctx, cc, service); err != nil || n == 0 {
		t.Errorf("describe %s: %d files, %v", service, n, err)
	}
	for _, name := range []string{service, ""} {
		rep, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: name})
		if err != nil || rep.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: %v, %v", name, rep.GetStatus(), err)
		}
	}
}
