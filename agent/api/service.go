package api

import (
	"context"

	"google.golang.org/grpc"
)

// ServiceName is the gRPC service name.
const ServiceName = "nvstripe.agent.v1.Agent"

// Server is what the agent implements. Errors should be status errors (see
// Status); other errors reach clients as codes.Unknown.
type Server interface {
	Map(context.Context, *MapRequest) (*MapReply, error)
	Unmap(context.Context, *UnmapRequest) (*UnmapReply, error)
	List(context.Context, *ListRequest) (*ListReply, error)
	Status(context.Context, *StatusRequest) (*StatusReply, error)
}

// NewServer returns a gRPC server offering impl with the JSON codec. Serve it
// on a unix-socket listener.
func NewServer(impl Server, opts ...grpc.ServerOption) *grpc.Server {
	s := grpc.NewServer(append([]grpc.ServerOption{grpc.ForceServerCodec(Codec{})}, opts...)...)
	s.RegisterService(serviceDesc(), impl)
	return s
}

// serviceDesc describes the service for grpc.Server.RegisterService.
func serviceDesc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: ServiceName,
		HandlerType: (*Server)(nil),
		Methods: []grpc.MethodDesc{
			method("Map", Server.Map),
			method("Unmap", Server.Unmap),
			method("List", Server.List),
			method("Status", Server.Status),
		},
		Metadata: "agent/api",
	}
}

// method adapts one typed method to grpc's MethodDesc: decode the request,
// run it through the interceptor chain when there is one, call.
func method[Req, Rep any](name string, call func(Server, context.Context, *Req) (*Rep, error)) grpc.MethodDesc {
	h := func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		req := new(Req)
		if err := dec(req); err != nil {
			return nil, err
		}
		impl := srv.(Server)
		if icpt == nil {
			return call(impl, ctx, req)
		}
		info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + ServiceName + "/" + name}
		return icpt(ctx, req, info, func(ctx context.Context, r any) (any, error) {
			return call(impl, ctx, r.(*Req))
		})
	}
	return grpc.MethodDesc{MethodName: name, Handler: h}
}
