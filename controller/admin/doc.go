// Package admin is the controller's admin API: the operations `nvstripe
// admin` runs on the records the controller acts on (cluster status,
// rebalance plans, drain, fail), done on etcd by Service, and served over
// gRPC by the controller (NewServer, Listen) for clients that reach the
// controller but not etcd (Dial).
//
// # Who may call
//
// The API acts with the controller's etcd credentials, so it is served on a
// unix socket (DefaultSocket, mode 0600: its owner only) or on TCP with
// mutual TLS only (TLSFiles: TLS 1.3, a client certificate signed by the
// configured CA is required; Listen refuses TCP without one, ErrTLSRequired).
//
// # Wire format
//
// The schema is admin.proto (service nvstripe.controller.v1.Admin);
// admin.pb.go and admin_grpc.pb.go are generated from it by protoc (`make
// proto`, checked by TestProtoGenerated at the module root) and committed.
// Messages are protocol buffers in ordinary gRPC frames. Fields are only
// ever added with new numbers. The server also offers the standard health
// service and server reflection, so `grpcurl -unix -plaintext PATH list`
// (or with -cacert/-cert/-key on TCP) and `describe` work. Errors travel as status messages; Client returns them as
// "controller admin API: MESSAGE".
//
// Concurrency: Service, Client and the server are safe for concurrent use.
package admin
