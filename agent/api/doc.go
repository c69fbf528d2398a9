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
// Messages are the Go structs of this package encoded as JSON (encoding/json,
// field names as in their json tags), carried in ordinary gRPC frames with the
// content-subtype "json" (content-type application/grpc+json). The codec is
// not registered globally: NewServer installs it with grpc.ForceServerCodec and
// Dial with grpc.ForceCodec, so nothing else in the process is affected.
// Unknown JSON fields are ignored, so fields can be added compatibly; a field is
// never renamed or given another meaning.
//
// Why JSON and a hand-written service description rather than protoc output:
// the API is local (a unix socket, one client: our CLI), has four small
// messages, and this keeps the build free of protoc and code generators;
// `grpcurl -plaintext -unix` still reaches it by naming the method, and the
// messages read as plain JSON in a packet capture.
//
// Errors travel as gRPC status codes; Client maps them back to the sentinel
// errors below (errors.Is), with the agent's message.
//
// Concurrency: Client and the server returned by NewServer are safe for
// concurrent use.
package api
