package agent

import (
	"context"
	"errors"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nbd"
)

// rpc serves the gRPC API (package api) with an Agent.
type rpc struct {
	api.UnimplementedAgentServer
	a *Agent
}

var _ api.AgentServer = rpc{}

func (r rpc) Map(ctx context.Context, req *api.MapRequest) (*api.MapReply, error) {
	spec, err := SpecOf(req)
	if err != nil {
		return nil, api.Status(err)
	}
	m, err := r.a.Map(ctx, spec)
	if err != nil {
		return nil, api.Status(classify(err))
	}
	return &api.MapReply{Mapping: m}, nil
}

func (r rpc) Unmap(ctx context.Context, req *api.UnmapRequest) (*api.UnmapReply, error) {
	if err := r.a.Unmap(ctx, req.Volume); err != nil {
		return nil, api.Status(classify(err))
	}
	return &api.UnmapReply{}, nil
}

func (r rpc) List(context.Context, *api.ListRequest) (*api.ListReply, error) {
	return &api.ListReply{Mappings: r.a.List()}, nil
}

func (r rpc) Status(context.Context, *api.StatusRequest) (*api.StatusReply, error) {
	return r.a.Status(), nil
}

// classed is an error with an API class added: errors.Is finds both.
type classed struct{ err, class error }

func (c classed) Error() string   { return c.err.Error() }
func (c classed) Unwrap() []error { return []error{c.err, c.class} }

// classify adds the API class of the error classes of meta, nbd and blockdev
// that clients should be able to tell apart.
func classify(err error) error {
	for _, c := range []struct{ from, to error }{
		{meta.ErrNotFound, api.ErrNotFound},
		{meta.ErrBusy, api.ErrBusy},
		{meta.ErrInvalid, api.ErrInvalid},
		{blockdev.ErrInvalid, api.ErrInvalid},
		{meta.ErrUnreachable, api.ErrUnreachable},
		{nbd.ErrNoKernelNBD, api.ErrUnsupported},
	} {
		if errors.Is(err, c.from) {
			return classed{err, c.to}
		}
	}
	return err
}
