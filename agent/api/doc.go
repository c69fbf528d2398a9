// Package api is the local control API of `nvstripe agent`: gRPC over a unix
// socket, used by `nvstripe map / unmap / ls --agent SOCKET`.
//
// Service nvstripe.agent.v1.Agent has four unary methods:
//
//	Map(MapRequest) MapReply         map a volume (NBD listener, kernel /dev/nbdN or FUSE)
//	Unmap(UnmapRequest) UnmapReply   stop serving, flush, release the lease, forget it
//	List(ListRequest) ListReply      the mappings with their state and counters
//	Status(StatusRequest) StatusReply the agent itself
//
// # Wire format
//
// The schema is agent.proto; agent.pb.go and agent_grpc.pb.go are generated
// from it by protoc (`make proto`, checked by TestProtoGenerated at the
// module root) and committed. Messages are protocol buffers in ordinary gRPC
// frames (content-type application/grpc). Fields are only ever added with
// new numbers, so an older client or agent ignores what it does not know.
// NewServer also registers the standard health service and server
// reflection: `grpcurl -plaintext -unix SOCKET list` names the services and
// `describe` prints the schema.
//
// Errors travel as gRPC status codes; Client maps them back to the sentinel
// errors below (errors.Is), with the agent's message.
//
// Concurrency: Client and the server returned by NewServer are safe for
// concurrent use.
package api
