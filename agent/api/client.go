package api

import (
	"context"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Error classes of the API, tested with errors.Is on Client errors.
var (
	// ErrNotFound: no such volume or mapping.
	ErrNotFound = errors.New("not found")
	// ErrExists: the volume is already mapped by this agent.
	ErrExists = errors.New("already mapped")
	// ErrInvalid: a bad request.
	ErrInvalid = errors.New("invalid request")
	// ErrBusy: the volume is owned elsewhere, or a mount is in use.
	ErrBusy = errors.New("busy")
	// ErrUnsupported: this node cannot serve the volume that way (no nbd
	// kernel module, no /dev/fuse).
	ErrUnsupported = errors.New("unsupported here")
	// ErrUnreachable: the agent (or its etcd) could not be reached.
	ErrUnreachable = errors.New("unreachable")
)

// codes pairs each class with its gRPC code.
func classCodes() []struct {
	class error
	code  codes.Code
} {
	return []struct {
		class error
		code  codes.Code
	}{
		{ErrNotFound, codes.NotFound},
		{ErrExists, codes.AlreadyExists},
		{ErrInvalid, codes.InvalidArgument},
		{ErrBusy, codes.FailedPrecondition},
		{ErrUnsupported, codes.Unimplemented},
		{ErrUnreachable, codes.Unavailable},
	}
}

// Status turns err into a gRPC status error whose code is that of the first
// class err matches (errors.Is), codes.Internal otherwise. A nil err stays
// nil.
func Status(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, c := range classCodes() {
		if errors.Is(err, c.class) {
			return status.Error(c.code, err.Error())
		}
	}
	return status.Error(codes.Internal, err.Error())
}

// Error is an error returned by the agent: its message, with the class of
// its code.
type Error struct {
	Code  codes.Code
	Msg   string
	class error
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns the class (nil for codes without one).
func (e *Error) Unwrap() error { return e.class }

// fromStatus maps a gRPC error back to an *Error with its class.
func fromStatus(err error, socket string) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	if st.Code() == codes.Unavailable {
		return &Error{Code: st.Code(), class: ErrUnreachable,
			Msg: fmt.Sprintf("agent at %s not reachable (is `nvstripe agent` running?): %s", socket, st.Message())}
	}
	e := &Error{Code: st.Code(), Msg: st.Message()}
	for _, c := range classCodes() {
		if c.code == st.Code() {
			e.class = c.class
		}
	}
	return e
}

// Client calls an agent: the generated AgentClient with its errors mapped
// back to the classes above.
type Client struct {
	cc     *grpc.ClientConn
	rpc    AgentClient
	socket string
}

// Dial returns a client of the agent listening on the unix socket path. It
// does not connect yet: the first call does, and fails with ErrUnreachable
// when no agent listens there.
func Dial(socket string, opts ...grpc.DialOption) (*Client, error) {
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, opts...)
	cc, err := grpc.NewClient("unix://"+socket, opts...)
	if err != nil {
		return nil, fmt.Errorf("agent socket %s: %w", socket, err)
	}
	return &Client{cc: cc, rpc: NewAgentClient(cc), socket: socket}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.cc.Close() }

// Conn is the client's connection, for the other services the agent offers
// (health, reflection).
func (c *Client) Conn() *grpc.ClientConn { return c.cc }

func invoke[Req, Rep any](ctx context.Context, c *Client, call func(context.Context, *Req, ...grpc.CallOption) (*Rep, error), req *Req) (*Rep, error) {
	rep, err := call(ctx, req)
	if err != nil {
		return nil, fromStatus(err, c.socket)
	}
	return rep, nil
}

// Map asks the agent to map a volume.
func (c *Client) Map(ctx context.Context, req *MapRequest) (*MapReply, error) {
	return invoke(ctx, c, c.rpc.Map, req)
}

// Unmap asks the agent to unmap a volume.
func (c *Client) Unmap(ctx context.Context, req *UnmapRequest) (*UnmapReply, error) {
	return invoke(ctx, c, c.rpc.Unmap, req)
}

// List lists the agent's mappings.
func (c *Client) List(ctx context.Context, req *ListRequest) (*ListReply, error) {
	return invoke(ctx, c, c.rpc.List, req)
}

// Status describes the agent.
func (c *Client) Status(ctx context.Context, req *StatusRequest) (*StatusReply, error) {
	return invoke(ctx, c, c.rpc.Status, req)
}

// WithClient runs fn with a client of the agent on socket, closed after.
func WithClient(socket string, fn func(*Client) error) error {
	c, err := Dial(socket)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

// Listening says whether socket is a unix socket (an agent may listen on
// it).
func Listening(socket string) bool {
	fi, err := os.Stat(socket)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}
