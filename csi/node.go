package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/internal/retry"
	"github.com/nvstripe/nvstripe/nbd"
	"github.com/nvstripe/nvstripe/ublk"
)

// blockFile is the file under the staging path a Block volume's device is
// bound to.
const blockFile = "block"

// The agent's values of Mapping.Via this driver maps with.
const (
	viaFUSE      = "fuse"
	viaNBDDevice = "nbd-device"
	viaUblk      = "ublk"
)

// servedWait bounds waiting for a restored mapping to be served again, and
// for a device to show a new size.
const servedWait = 60 * time.Second

// NodeGetInfo names the node and its topology.
func (d *Driver) NodeGetInfo(ctx context.Context, _ *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	top, err := d.topology(ctx)
	if err != nil {
		return nil, err
	}
	return &csipb.NodeGetInfoResponse{NodeId: d.o.NodeID, AccessibleTopology: top}, nil
}

// NodeGetCapabilities lists what the node service does.
func (d *Driver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	var caps []*csipb.NodeServiceCapability
	for _, t := range []csipb.NodeServiceCapability_RPC_Type{
		csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csipb.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS,
	} {
		caps = append(caps, &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{
			Rpc: &csipb.NodeServiceCapability_RPC{Type: t}}})
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// NodeStageVolume maps the volume through the agent and mounts it (or binds
// its device) on the staging path.
func (d *Driver) NodeStageVolume(ctx context.Context, r *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	vol, staging, c := r.GetVolumeId(), r.GetStagingTargetPath(), r.GetVolumeCapability()
	if err := required("volume id", vol, "staging target path", staging); err != nil {
		return nil, err
	}
	if err := checkCapability(c); err != nil {
		return nil, err
	}
	defer d.locks.lock(vol)()
	ro := readOnlyMode(c)
	dev, err := d.attach(ctx, vol, ro)
	if err != nil {
		return nil, err
	}
	if c.GetBlock() != nil {
		err = stageBlock(dev, staging, ro)
	} else {
		err = stageMount(ctx, dev, staging, c.GetMount(), ro)
	}
	if err != nil {
		// Nothing is staged: leave nothing mapped either.
		if derr := d.detach(ctx, vol); derr != nil {
			d.o.Log.Warn("unmapping after a failed stage", "volume", vol, "err", derr)
		}
		return nil, err
	}
	return &csipb.NodeStageVolumeResponse{}, nil
}

// stageBlock binds dev onto STAGING/block.
func stageBlock(dev, staging string, ro bool) error {
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	file := filepath.Join(staging, blockFile)
	if m, err := mountAt(file); err != nil {
		return grpcError(err)
	} else if m != nil {
		return stagedAlready(m, dev, file)
	}
	f, err := os.OpenFile(file, os.O_CREATE, 0o640)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	f.Close()
	if err := bindMount(dev, file, ro); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

// stagedAlready accepts a repeated stage: path must hold dev's filesystem,
// or dev itself bound there, else AlreadyExists.
func stagedAlready(m *mountEntry, dev, path string) error {
	var want, have unix.Stat_t
	if err := unix.Stat(dev, &want); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if m.Dev == fmt.Sprintf("%d:%d", unix.Major(want.Rdev), unix.Minor(want.Rdev)) {
		return nil
	}
	if unix.Stat(path, &have) == nil && have.Mode&unix.S_IFMT == unix.S_IFBLK && have.Rdev == want.Rdev {
		return nil
	}
	return status.Errorf(codes.AlreadyExists, "%s is mounted from %s, not from %s", path, m.Source, dev)
}

// stageMount mounts dev's filesystem on staging, making one on a blank
// device of a read-write stage.
func stageMount(ctx context.Context, dev, staging string, mc *csipb.VolumeCapability_MountVolume, ro bool) error {
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if m, err := mountAt(staging); err != nil {
		return grpcError(err)
	} else if m != nil {
		return stagedAlready(m, dev, staging)
	}
	want := mc.GetFsType()
	if want == "" {
		want = "ext4"
	}
	have, err := diskFormat(ctx, dev)
	if err != nil {
		return status.Errorf(codes.Internal, "probing %s: %v", dev, err)
	}
	switch {
	case have == "" && ro:
		return status.Errorf(codes.FailedPrecondition, "%s is blank and the stage is read-only: a filesystem can only be made by a read-write stage", dev)
	case have == "":
		if err := makeFS(ctx, dev, want); err != nil {
			return status.Errorf(codes.Internal, "making %s on %s: %v", want, dev, err)
		}
	case have != want:
		return status.Errorf(codes.FailedPrecondition, "%s holds %s, not %s: it is not reformatted", dev, have, want)
	}
	if err := mountFS(dev, staging, want, ro, mc.GetMountFlags()); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

// NodeUnstageVolume unmounts the staging path, detaches the device and
// unmaps the volume through the agent.
func (d *Driver) NodeUnstageVolume(ctx context.Context, r *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	vol, staging := r.GetVolumeId(), r.GetStagingTargetPath()
	if err := required("volume id", vol, "staging target path", staging); err != nil {
		return nil, err
	}
	defer d.locks.lock(vol)()
	file := filepath.Join(staging, blockFile)
	for _, p := range []string{file, staging} {
		if err := unmount(p); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := d.detach(ctx, vol); err != nil {
		return nil, err
	}
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume bind-mounts the staged volume onto the target.
func (d *Driver) NodePublishVolume(ctx context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	vol, staging, target, c := r.GetVolumeId(), r.GetStagingTargetPath(), r.GetTargetPath(), r.GetVolumeCapability()
	if err := required("volume id", vol, "staging target path", staging, "target path", target); err != nil {
		return nil, err
	}
	if err := checkCapability(c); err != nil {
		return nil, err
	}
	if c.GetBlock() != nil && r.GetReadonly() && !readOnlyMode(c) {
		// A read-only bind of a device node does not stop writes through it.
		return nil, status.Error(codes.FailedPrecondition, "a read-only publish of a block volume needs a read-only access mode (its device is then read-only)")
	}
	defer d.locks.lock(vol)()
	src := staging
	if c.GetBlock() != nil {
		src = filepath.Join(staging, blockFile)
	}
	if m, err := mountAt(src); err != nil {
		return nil, grpcError(err)
	} else if m == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", vol, staging)
	}
	if m, err := mountAt(target); err != nil || m != nil {
		return &csipb.NodePublishVolumeResponse{}, grpcError(err) // published already
	}
	if c.GetBlock() != nil {
		if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		f, err := os.OpenFile(target, os.O_CREATE, 0o640)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		f.Close()
	} else if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := bindMount(src, target, r.GetReadonly() || readOnlyMode(c)); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csipb.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts the target and removes it.
func (d *Driver) NodeUnpublishVolume(ctx context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	vol, target := r.GetVolumeId(), r.GetTargetPath()
	if err := required("volume id", vol, "target path", target); err != nil {
		return nil, err
	}
	defer d.locks.lock(vol)()
	if err := unmount(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports a published or staged volume's space.
func (d *Driver) NodeGetVolumeStats(ctx context.Context, r *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	vol, path := r.GetVolumeId(), r.GetVolumePath()
	if err := required("volume id", vol, "volume path", path); err != nil {
		return nil, err
	}
	m, err := d.mapping(ctx, vol)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s is not staged on this node", vol)
	}
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "%s does not exist", path)
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if !fi.IsDir() {
		size, err := deviceSize(path)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		return &csipb.NodeGetVolumeStatsResponse{
			Usage: []*csipb.VolumeUsage{{Unit: csipb.VolumeUsage_BYTES, Total: size}}}, nil
	}
	if mt, err := mountAt(path); err != nil || mt == nil {
		return nil, status.Errorf(codes.NotFound, "nothing is mounted on %s", path)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	bs := st.Bsize
	return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: int64(st.Blocks) * bs, Available: int64(st.Bavail) * bs, Used: int64(st.Blocks-st.Bfree) * bs},
		{Unit: csipb.VolumeUsage_INODES, Total: int64(st.Files), Available: int64(st.Ffree), Used: int64(st.Files - st.Ffree)},
	}}, nil
}

// NodeExpandVolume waits for the device to show the volume's new size and
// grows a mounted filesystem on it.
func (d *Driver) NodeExpandVolume(ctx context.Context, r *csipb.NodeExpandVolumeRequest) (*csipb.NodeExpandVolumeResponse, error) {
	vol, path := r.GetVolumeId(), r.GetVolumePath()
	if err := required("volume id", vol, "volume path", path); err != nil {
		return nil, err
	}
	defer d.locks.lock(vol)()
	m, err := d.mapping(ctx, vol)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s is not staged on this node", vol)
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "%s does not exist", path)
	}
	rec, err := d.o.Store.Volume(ctx, vol)
	if err != nil {
		return nil, grpcError(err)
	}
	dev, err := d.device(ctx, m)
	if err != nil {
		return nil, err
	}
	size, err := d.waitSize(ctx, m, dev, max(rec.Size, r.GetCapacityRange().GetRequiredBytes()))
	if err != nil {
		return nil, err
	}
	if r.GetVolumeCapability().GetBlock() == nil {
		if mt, err := mountAt(path); err == nil && mt != nil && mt.FSType != "" && !m.GetReadOnly() {
			if err := growFS(ctx, dev, path, mt.FSType); err != nil {
				return nil, status.Errorf(codes.Internal, "growing %s: %v", path, err)
			}
		}
	}
	return &csipb.NodeExpandVolumeResponse{CapacityBytes: size}, nil
}

// waitSize waits until dev shows at least want bytes, telling a loop device
// to read its file's size anew.
func (d *Driver) waitSize(ctx context.Context, m *api.Mapping, dev string, want int64) (int64, error) {
	deadline := time.Now().Add(servedWait)
	for {
		if m.GetVia() == viaFUSE {
			if err := refreshLoop(ctx, dev); err != nil {
				return 0, status.Error(codes.Internal, err.Error())
			}
		}
		size, err := deviceSize(dev)
		if err != nil {
			return 0, status.Error(codes.Internal, err.Error())
		}
		if size >= want {
			return size, nil
		}
		if time.Now().After(deadline) {
			return 0, status.Errorf(codes.Unavailable, "%s still shows %d bytes, not %d: the agent has not seen the new size yet (ublk devices before Linux 6.16 keep theirs until mapped again)", dev, size, want)
		}
		if err := retry.Sleep(ctx, 200*time.Millisecond); err != nil {
			return 0, grpcError(err)
		}
	}
}

// mapping is the agent's mapping of vol, nil when it has none.
func (d *Driver) mapping(ctx context.Context, vol string) (*api.Mapping, error) {
	var rep *api.ListReply
	err := d.withAgent(func(c *api.Client) (err error) { rep, err = c.List(ctx, &api.ListRequest{}); return err })
	if err != nil {
		return nil, grpcError(err)
	}
	for _, m := range rep.GetMappings() {
		if m.GetVolume() == vol {
			return m, nil
		}
	}
	return nil, nil
}

// mapRequest is how this node maps vol: ublk, else kernel nbd, else the
// agent's FUSE file (a loop device goes over it).
func (d *Driver) mapRequest(vol string, ro bool) (*api.MapRequest, error) {
	req := &api.MapRequest{Volume: vol, ReadOnly: ro}
	switch {
	case d.o.Frontend == FrontendFUSE:
	case ublk.Available() == nil:
		req.Ublk = true
		return req, nil
	case nbdLoaded():
		dev, err := nbd.PickDevice(vol)
		if err != nil {
			return nil, status.Errorf(codes.ResourceExhausted, "no free nbd device: %v", err)
		}
		req.NbdDevice = dev.Path
		return req, nil
	}
	req.FuseDir = filepath.Join(d.o.StateDir, "fuse", vol)
	return req, nil
}

// nbdLoaded says whether the kernel's nbd driver is there.
func nbdLoaded() bool {
	_, err := os.Stat("/sys/module/nbd")
	return err == nil
}

// attach maps vol through the agent (or finds its mapping) and returns its
// block device.
func (d *Driver) attach(ctx context.Context, vol string, ro bool) (string, error) {
	m, err := d.mapping(ctx, vol)
	if err != nil {
		return "", err
	}
	if m == nil {
		req, err := d.mapRequest(vol, ro)
		if err != nil {
			return "", err
		}
		var rep *api.MapReply
		err = d.withAgent(func(c *api.Client) (err error) { rep, err = c.Map(ctx, req); return err })
		switch {
		case errors.Is(err, api.ErrBusy):
			return "", status.Errorf(codes.FailedPrecondition, "volume %s is in use elsewhere (its ownership lease is held): %v", vol, err)
		case err != nil:
			return "", grpcError(err)
		}
		m = rep.GetMapping()
	}
	if m.GetReadOnly() != ro {
		return "", status.Errorf(codes.AlreadyExists, "volume %s is mapped on this node with read_only=%t, the stage asks for read_only=%t", vol, m.GetReadOnly(), ro)
	}
	return d.device(ctx, m)
}

// device is the block device of mapping m, waiting for a restored mapping
// to be served and attaching the loop device over a FUSE file.
func (d *Driver) device(ctx context.Context, m *api.Mapping) (string, error) {
	vol := m.GetVolume()
	deadline := time.Now().Add(servedWait)
	for m.GetState() != api.StateServing {
		if m.GetVia() == viaFUSE {
			unmountDead(m.GetWhere())
		}
		if m.GetState() == api.StateFenced || time.Now().After(deadline) {
			return "", status.Errorf(codes.Unavailable, "volume %s is %s on this node: %s", vol, m.GetState(), m.GetError())
		}
		if err := retry.Sleep(ctx, 200*time.Millisecond); err != nil {
			return "", grpcError(err)
		}
		var err error
		if m, err = d.mapping(ctx, vol); err != nil {
			return "", err
		}
		if m == nil {
			return "", status.Errorf(codes.Aborted, "volume %s was unmapped meanwhile", vol)
		}
	}
	switch m.GetVia() {
	case viaUblk, viaNBDDevice:
		return m.GetUrl(), nil
	case viaFUSE:
		dev, stale, err := loopsOver(fuseFile(m))
		if err == nil && dev == "" {
			dev, err = attachLoop(ctx, fuseFile(m), m.GetReadOnly())
		}
		if err == nil && len(stale) > 0 {
			err = d.heal(ctx, dev, stale)
		}
		if err != nil {
			return "", status.Errorf(codes.Internal, "loop device over %s: %v", fuseFile(m), err)
		}
		return dev, nil
	}
	return "", status.Errorf(codes.FailedPrecondition, "volume %s is mapped on this node as %s (%s), not as a block device: unmap it first", vol, m.GetVia(), m.GetUrl())
}

// detach detaches vol's loop device and unmaps it through the agent.
func (d *Driver) detach(ctx context.Context, vol string) error {
	m, err := d.mapping(ctx, vol)
	if err != nil || m == nil {
		return err
	}
	if m.GetVia() == viaFUSE {
		if err := detachLoops(ctx, fuseFile(m)); err != nil {
			return status.Error(codes.Internal, err.Error())
		}
	}
	// The kernel lets go of a detached loop device's file a moment later:
	// a FUSE file still held is ErrBusy for that moment.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err = d.withAgent(func(c *api.Client) error { _, err := c.Unmap(ctx, &api.UnmapRequest{Volume: vol}); return err })
		if err == nil || errors.Is(err, api.ErrNotFound) {
			return nil
		}
		if !errors.Is(err, api.ErrBusy) || time.Now().After(deadline) {
			return grpcError(fmt.Errorf("unmapping %s: %w", vol, err))
		}
		if err := retry.Sleep(ctx, 100*time.Millisecond); err != nil {
			return grpcError(err)
		}
	}
}

// unmountDead lazily unmounts dir when it is a FUSE mount whose process
// ended (ENOTCONN), so that the agent that restores the mapping can mount
// it again.
func unmountDead(dir string) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); errors.Is(err, unix.ENOTCONN) {
		unix.Unmount(dir, unix.MNT_DETACH)
	}
}

// heal moves what is mounted from stale loop devices (over a FUSE file
// whose agent stopped: every IO fails) onto dev, the loop device over the
// file the agent serves now: each mount is detached and made again in the
// same place, the first as a mount of the filesystem and the others as bind
// mounts of it, read-only where they were; a device bound onto a file is
// bound again. Data the old mounts had not written back is lost with the
// old agent, as on a crash; what was flushed reads back.
func (d *Driver) heal(ctx context.Context, dev string, stale []string) error {
	for _, old := range stale {
		mounts, err := mountsFrom(old)
		if err != nil {
			return err
		}
		for _, mt := range mounts {
			if err := unix.Unmount(mt.Point, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("detaching %s: %w", mt.Point, err)
			}
		}
		first := ""
		for _, mt := range mounts {
			switch {
			case mt.Device:
				err = bindMount(dev, mt.Point, mt.ReadOnly)
			case first == "":
				err, first = mountFS(dev, mt.Point, mt.FSType, mt.ReadOnly, nil), mt.Point
			default:
				err = bindMount(first, mt.Point, mt.ReadOnly)
			}
			if err != nil {
				return err
			}
			d.o.Log.Info("remounted after the agent's restart", "path", mt.Point, "old", old, "device", dev)
		}
		if _, err := run(ctx, "losetup", "-d", old); err != nil {
			d.o.Log.Warn("detaching a stale loop device", "device", old, "err", err)
		}
	}
	return nil
}

// Recover heals the mounts of every volume mapped through a FUSE file and
// a loop device (heal), waiting for the agent to serve each again. The
// node service runs it when it starts; NodeStageVolume does the same for
// its volume.
func (d *Driver) Recover(ctx context.Context) error {
	var rep *api.ListReply
	err := d.withAgent(func(c *api.Client) (err error) { rep, err = c.List(ctx, &api.ListRequest{}); return err })
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range rep.GetMappings() {
		if m.GetVia() != viaFUSE {
			continue
		}
		if _, stale, err := loopsOver(fuseFile(m)); err != nil || len(stale) == 0 {
			continue // nothing stale (or nothing to learn here)
		}
		unlock := d.locks.lock(m.GetVolume())
		_, err := d.device(ctx, m)
		unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.GetVolume(), err))
		}
	}
	return errors.Join(errs...)
}

// fuseFile is the file of a FUSE mapping (known before it is served).
func fuseFile(m *api.Mapping) string {
	return filepath.Join(m.GetWhere(), m.GetVolume())
}
