package csi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/capacity"
	"github.com/nvstripe/nvstripe/internal/buildinfo"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/placement"
)

// DriverName is the CSI driver name (the CSIDriver object's name and the
// provisioner of StorageClasses).
const DriverName = "nvstripe.io"

// TopologyKey is the one topology segment of volumes and nodes; its value
// is the cluster's name.
const TopologyKey = "topology.nvstripe.io/cluster"

// DefaultStateDir holds the FUSE directories of the loop-device way of
// mapping.
const DefaultStateDir = "/var/lib/nvstripe/csi"

// Frontends Options.Frontend may force.
const (
	FrontendAuto = ""     // ublk, else nbd, else FUSE + loop
	FrontendFUSE = "fuse" // always the agent's FUSE file + a loop device
)

// Options configure a Driver.
type Options struct {
	// Store is the cluster's metadata. Required.
	Store *meta.Store
	// NodeID is this node's id (NodeGetInfo). Required for the node service.
	NodeID string
	// Agent is the unix socket of this node's agent. Required for the node
	// service.
	Agent string
	// StateDir holds the FUSE directories of the loop-device way. Default
	// DefaultStateDir.
	StateDir string
	// Controller and Node say which services to serve; both false means both.
	Controller, Node bool
	// Frontend forces how volumes are mapped: FrontendAuto or FrontendFUSE.
	Frontend string
	// Log receives the driver's log lines. Default: discarded.
	Log *slog.Logger
}

// Driver implements the CSI identity, controller and node services.
type Driver struct {
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedControllerServer
	csipb.UnimplementedNodeServer

	o     Options
	locks keyedMutex
}

// New checks o and returns a driver.
func New(o Options) (*Driver, error) {
	if o.Store == nil {
		return nil, errors.New("csi: a metadata store is required")
	}
	if !o.Controller && !o.Node {
		o.Controller, o.Node = true, true
	}
	if o.Node && (o.NodeID == "" || o.Agent == "") {
		return nil, errors.New("csi: the node service needs a node id and the agent's socket")
	}
	if o.Frontend != FrontendAuto && o.Frontend != FrontendFUSE {
		return nil, fmt.Errorf("csi: unknown frontend %q", o.Frontend)
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Driver{o: o}, nil
}

// Serve serves d on endpoint ("unix://PATH" or "unix:PATH" or a path) until
// ctx ends; the socket is mode 0600. A stale socket file is replaced. The
// node service first heals, in the background, stages an agent restart
// broke (Recover).
func (d *Driver) Serve(ctx context.Context, endpoint string, ready func(addr string)) error {
	path, err := socketPath(endpoint)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("csi: removing stale socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("csi: listening on %s: %w", path, err)
	}
	defer l.Close()
	// Creating, mapping and deleting volumes is a privileged act: root only,
	// like the agent's socket (kubelet and the sidecars run as root).
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("csi: %w", err)
	}
	gs := grpc.NewServer(grpc.UnaryInterceptor(d.logCalls))
	csipb.RegisterIdentityServer(gs, d)
	if d.o.Controller {
		csipb.RegisterControllerServer(gs, d)
	}
	if d.o.Node {
		csipb.RegisterNodeServer(gs, d)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			gs.GracefulStop()
		case <-done:
		}
	}()
	if d.o.Node {
		go func() {
			if err := d.Recover(ctx); err != nil {
				d.o.Log.Warn("recovering staged volumes", "err", err)
			}
		}()
	}
	if ready != nil {
		ready(path)
	}
	if err := gs.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// socketPath is the file of a unix endpoint.
func socketPath(endpoint string) (string, error) {
	p := endpoint
	for _, prefix := range []string{"unix://", "unix:"} {
		if rest, ok := strings.CutPrefix(endpoint, prefix); ok {
			p = rest
			break
		}
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("csi: endpoint %q: want unix:///ABSOLUTE/PATH", endpoint)
	}
	return p, nil
}

// logCalls logs each call and its outcome.
func (d *Driver) logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	rep, err := h(ctx, req)
	if err != nil {
		d.o.Log.Info("csi call failed", "method", info.FullMethod, "code", status.Code(err), "err", err)
	} else {
		d.o.Log.Debug("csi call", "method", info.FullMethod)
	}
	return rep, err
}

// GetPluginInfo names the driver.
func (d *Driver) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	v := buildinfo.Read().Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	return &csipb.GetPluginInfoResponse{Name: DriverName, VendorVersion: v}, nil
}

// GetPluginCapabilities says what the plugin offers.
func (d *Driver) GetPluginCapabilities(context.Context, *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	svc := func(t csipb.PluginCapability_Service_Type) *csipb.PluginCapability {
		return &csipb.PluginCapability{Type: &csipb.PluginCapability_Service_{Service: &csipb.PluginCapability_Service{Type: t}}}
	}
	caps := []*csipb.PluginCapability{svc(csipb.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		{Type: &csipb.PluginCapability_VolumeExpansion_{VolumeExpansion: &csipb.PluginCapability_VolumeExpansion{
			Type: csipb.PluginCapability_VolumeExpansion_ONLINE}}}}
	if d.o.Controller {
		caps = append(caps, svc(csipb.PluginCapability_Service_CONTROLLER_SERVICE))
	}
	return &csipb.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

// Probe says whether the driver can work: etcd answers (and, for the node
// service, the agent).
func (d *Driver) Probe(ctx context.Context, _ *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	if _, err := d.o.Store.Cluster(ctx); err != nil {
		return nil, grpcError(err)
	}
	if d.o.Node {
		if err := d.withAgent(func(c *api.Client) error { _, err := c.Status(ctx, &api.StatusRequest{}); return err }); err != nil {
			return nil, grpcError(err)
		}
	}
	return &csipb.ProbeResponse{}, nil
}

// topology is the cluster's topology segment.
func (d *Driver) topology(ctx context.Context) (*csipb.Topology, error) {
	c, err := d.o.Store.Cluster(ctx)
	if err != nil {
		return nil, grpcError(err)
	}
	return &csipb.Topology{Segments: map[string]string{TopologyKey: c.Name}}, nil
}

// withAgent runs fn with a client of the node's agent.
func (d *Driver) withAgent(fn func(*api.Client) error) error {
	return api.WithClient(d.o.Agent, fn)
}

// grpcError gives err the CSI code of its class; an error that already has
// a code keeps it.
func grpcError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		return status.Error(ae.Code, ae.Msg)
	}
	code := codes.Internal
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, meta.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, meta.ErrExists):
		code = codes.AlreadyExists
	case errors.Is(err, meta.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, meta.ErrBusy):
		code = codes.FailedPrecondition
	case errors.Is(err, meta.ErrUnreachable), errors.Is(err, meta.ErrConflict):
		code = codes.Unavailable
	case errors.Is(err, placement.ErrNotEnoughDomains), errors.Is(err, placement.ErrNoSpace), errors.Is(err, capacity.ErrOvercommitted):
		code = codes.ResourceExhausted
	}
	return status.Error(code, err.Error())
}

// keyedMutex serialises calls on one volume.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	mu    sync.Mutex
	users int
}

// lock locks key and returns its unlock.
func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// required checks request fields given as name, value pairs: the first
// empty one is InvalidArgument "a NAME is required".
func required(fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i+1] == "" {
			return status.Errorf(codes.InvalidArgument, "a %s is required", fields[i])
		}
	}
	return nil
}
