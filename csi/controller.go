package csi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nvstripe/nvstripe/capacity"
	"github.com/nvstripe/nvstripe/meta"
)

// defaultVolumeSize is the size of a volume created without a capacity
// range.
const defaultVolumeSize = 1 << 30

// Parameter names of StorageClasses.
const (
	paramK             = "k"
	paramM             = "m"
	paramChecksums     = "checksums"
	paramWriteLog      = "writeLog"
	paramFailureDomain = "failureDomain"
	sidecarPrefix      = "csi.storage.k8s.io/"
)

// qosParams are the QoS parameters of StorageClasses and
// VolumeAttributesClasses, each the `volume create|set` flag it stands for:
// values are parsed by the same code as the flags.
var qosParams = map[string]string{
	"qosIOPS": "qos-iops", "qosReadIOPS": "qos-read-iops", "qosWriteIOPS": "qos-write-iops",
	"qosBPS": "qos-bps", "qosReadBPS": "qos-read-bps", "qosWriteBPS": "qos-write-bps",
	"qosBurst": "qos-burst",
}

// parseQoS reads the QoS parameters of params into f; it reports whether
// key is one. A bad value is InvalidArgument naming what.
func parseQoS(f *capacity.QoSFlags, what, key, v string) (bool, error) {
	flag, ok := qosParams[key]
	if !ok {
		return false, nil
	}
	if err := f.Set(flag, v); err != nil {
		return true, status.Errorf(codes.InvalidArgument, "%s: %s=%q: %v", what, key, v, err)
	}
	return true, nil
}

// qosChange is the change f asks for; limits that are wrong together are
// InvalidArgument naming what.
func qosChange(f *capacity.QoSFlags, what string) (meta.QoSChange, error) {
	c, err := f.Change()
	if err != nil {
		return meta.QoSChange{}, status.Errorf(codes.InvalidArgument, "%s: %v", what, err)
	}
	return c, nil
}

// parseMutable reads mutable_parameters (a VolumeAttributesClass's): QoS
// parameters only. Only the limits given change; 0 removes one.
func parseMutable(params map[string]string) (meta.QoSChange, error) {
	const what = "mutable parameters"
	var f capacity.QoSFlags
	for key, v := range params {
		ok, err := parseQoS(&f, what, key, v)
		if err != nil {
			return meta.QoSChange{}, err
		}
		if !ok {
			return meta.QoSChange{}, status.Errorf(codes.InvalidArgument, "%s: %q cannot change on a volume (only %s can)", what, key, qosNames())
		}
	}
	return qosChange(&f, what)
}

// qosNames lists the QoS parameter names.
func qosNames() string {
	names := slices.Sorted(maps.Keys(qosParams))
	return strings.Join(names, ", ")
}

// volumeID is the volume of CSI name: the name itself when it is a valid
// volume name, else "csi-" and 40 hex digits of its SHA-256 (CSI names may
// be 128 characters of anything).
func volumeID(name string) string {
	if validName(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "csi-" + hex.EncodeToString(sum[:20])
}

// validName mirrors meta's rule for names.
func validName(name string) bool {
	if len(name) < 1 || len(name) > 63 || strings.ContainsAny(name[:1], ".-_") {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// classParams are a StorageClass's parameters, parsed.
type classParams struct {
	K, M          int
	Checksum      string // "" or crc32c
	WriteLog      string // "" or ppl
	FailureDomain string
	QoS           meta.QoSChange
}

// parseParams reads params; an unknown key or bad value is InvalidArgument.
func parseParams(params map[string]string) (classParams, error) {
	p := classParams{K: 4, M: 2, Checksum: meta.ChecksumCRC32C}
	bad := func(format string, args ...any) (classParams, error) {
		return classParams{}, status.Errorf(codes.InvalidArgument, "StorageClass parameters: "+format, args...)
	}
	const what = "StorageClass parameters"
	writeLog := ""
	var qos capacity.QoSFlags
	for key, v := range params {
		if ok, err := parseQoS(&qos, what, key, v); ok {
			if err != nil {
				return classParams{}, err
			}
			continue
		}
		var err error
		switch key {
		case paramK:
			p.K, err = strconv.Atoi(v)
		case paramM:
			p.M, err = strconv.Atoi(v)
		case paramChecksums:
			var on bool
			if on, err = strconv.ParseBool(v); !on {
				p.Checksum = ""
			}
		case paramWriteLog:
			if _, err = strconv.ParseBool(v); err == nil {
				writeLog = v
			}
		case paramFailureDomain:
			p.FailureDomain = v
		default:
			if !strings.HasPrefix(key, sidecarPrefix) {
				return bad("unknown parameter %q (known: k, m, checksums, writeLog, failureDomain, %s)", key, qosNames())
			}
		}
		if err != nil {
			return bad("%s=%q: %v", key, v, err)
		}
	}
	if p.K < 1 || p.M < 0 {
		return bad("k=%d m=%d: need k >= 1 and m >= 0", p.K, p.M)
	}
	on, _ := strconv.ParseBool(writeLog)
	switch {
	case writeLog == "" && p.Checksum != "", on && p.Checksum != "":
		p.WriteLog = meta.WriteLogPPL
	case on:
		return bad("writeLog=true needs checksums=true")
	}
	var err error
	p.QoS, err = qosChange(&qos, what)
	return p, err
}

// checkDomain refuses a failureDomain that is not the cluster's.
func (d *Driver) checkDomain(ctx context.Context, want string) error {
	if want == "" {
		return nil
	}
	c, err := d.o.Store.Cluster(ctx)
	if err != nil {
		return grpcError(err)
	}
	have := c.DomainLabel
	if have == "" && want == "host" || want == have {
		return nil
	}
	if have == "" {
		have = "host (every host is its own domain)"
	}
	return status.Errorf(codes.InvalidArgument, "failureDomain %q: this cluster's failure domains are %s", want, have)
}

// requestedSize is the size to create for r: the required bytes (or the
// limit, or defaultVolumeSize) rounded up to meta.BlockSize.
func requestedSize(r *csipb.CapacityRange) (int64, error) {
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	if req < 0 || lim < 0 {
		return 0, status.Error(codes.InvalidArgument, "negative capacity")
	}
	size := req
	if size == 0 {
		size = defaultVolumeSize
		if lim > 0 && lim < size {
			size = lim
		}
	}
	size = (size + meta.BlockSize - 1) / meta.BlockSize * meta.BlockSize
	if lim > 0 && size > lim {
		return 0, status.Errorf(codes.OutOfRange, "capacity range %d-%d holds no multiple of %d bytes", req, lim, meta.BlockSize)
	}
	return size, nil
}

// CreateVolume creates a thin volume (see the package doc).
func (d *Driver) CreateVolume(ctx context.Context, r *csipb.CreateVolumeRequest) (*csipb.CreateVolumeResponse, error) {
	if r.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume name is required")
	}
	if err := checkCapabilities(r.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if r.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "volumes from snapshots or clones are not supported")
	}
	p, err := parseParams(r.GetParameters())
	if err != nil {
		return nil, err
	}
	mutable, err := parseMutable(r.GetMutableParameters())
	if err != nil {
		return nil, err
	}
	qos := mutable.Apply(p.QoS.Apply(meta.QoS{}))
	if err := qos.Check(); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "StorageClass and mutable parameters together: %v", err)
	}
	if err := d.checkDomain(ctx, p.FailureDomain); err != nil {
		return nil, err
	}
	size, err := requestedSize(r.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	id := volumeID(r.GetName())
	defer d.locks.lock(id)()
	spec := meta.VolumeSpec{Name: id, Size: size, Layout: meta.Layout{K: p.K, M: p.M, Chunk: 128 << 10,
		Checksum: p.Checksum, WriteLog: p.WriteLog}, BindChecksums: p.Checksum != "", QoS: qos}
	rec, warn, err := capacity.CreateVolume(ctx, d.o.Store, spec)
	if errors.Is(err, meta.ErrExists) {
		if rec, err = d.o.Store.Volume(ctx, id); err == nil {
			err = sameVolume(rec, p, r.GetCapacityRange())
		}
	}
	if err != nil {
		return nil, grpcError(err)
	}
	if warn != "" {
		d.o.Log.Warn("volume created past the usable space", "volume", id, "warning", warn)
	}
	top, err := d.topology(ctx)
	if err != nil {
		return nil, err
	}
	return &csipb.CreateVolumeResponse{Volume: &csipb.Volume{VolumeId: rec.Name, CapacityBytes: rec.Size,
		VolumeContext:      map[string]string{"layout": fmt.Sprintf("%d+%d", rec.Layout.K, rec.Layout.M)},
		AccessibleTopology: []*csipb.Topology{top}}}, nil
}

// sameVolume checks that an existing volume is the one a repeated
// CreateVolume asks for; otherwise AlreadyExists. Its QoS is not compared:
// ControllerModifyVolume may have changed it since.
func sameVolume(rec *meta.VolumeRecord, p classParams, r *csipb.CapacityRange) error {
	l := rec.Layout
	switch {
	case rec.State != meta.VolumeReady:
		return status.Errorf(codes.AlreadyExists, "volume %s exists and is being deleted", rec.Name)
	case l.K != p.K || l.M != p.M || l.Checksum != p.Checksum || l.WriteLog != p.WriteLog:
		return status.Errorf(codes.AlreadyExists, "volume %s exists with layout %d+%d checksum %q write log %q", rec.Name, l.K, l.M, l.Checksum, l.WriteLog)
	case rec.Size < r.GetRequiredBytes() || r.GetLimitBytes() > 0 && rec.Size > r.GetLimitBytes():
		return status.Errorf(codes.AlreadyExists, "volume %s exists with %d bytes, outside the range asked for", rec.Name, rec.Size)
	}
	return nil
}

// DeleteVolume removes a volume; a missing one is success.
func (d *Driver) DeleteVolume(ctx context.Context, r *csipb.DeleteVolumeRequest) (*csipb.DeleteVolumeResponse, error) {
	id := r.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume id is required")
	}
	defer d.locks.lock(id)()
	err := d.o.Store.DeleteVolume(ctx, id)
	if err != nil && !errors.Is(err, meta.ErrNotFound) && !errors.Is(err, meta.ErrInvalid) {
		return nil, grpcError(err)
	}
	return &csipb.DeleteVolumeResponse{}, nil
}

// ControllerGetCapabilities lists what the controller does.
func (d *Driver) ControllerGetCapabilities(context.Context, *csipb.ControllerGetCapabilitiesRequest) (*csipb.ControllerGetCapabilitiesResponse, error) {
	var caps []*csipb.ControllerServiceCapability
	for _, t := range []csipb.ControllerServiceCapability_RPC_Type{
		csipb.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csipb.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csipb.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csipb.ControllerServiceCapability_RPC_GET_CAPACITY,
		csipb.ControllerServiceCapability_RPC_MODIFY_VOLUME,
	} {
		caps = append(caps, &csipb.ControllerServiceCapability{Type: &csipb.ControllerServiceCapability_Rpc{
			Rpc: &csipb.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csipb.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// ValidateVolumeCapabilities confirms the capabilities the driver serves.
func (d *Driver) ValidateVolumeCapabilities(ctx context.Context, r *csipb.ValidateVolumeCapabilitiesRequest) (*csipb.ValidateVolumeCapabilitiesResponse, error) {
	if r.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume id is required")
	}
	if len(r.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	if _, err := d.o.Store.Volume(ctx, r.GetVolumeId()); err != nil {
		return nil, grpcError(err)
	}
	if err := checkCapabilities(r.GetVolumeCapabilities()); err != nil {
		return &csipb.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	if _, err := parseParams(r.GetParameters()); err != nil {
		return &csipb.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	if _, err := parseMutable(r.GetMutableParameters()); err != nil {
		return &csipb.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	return &csipb.ValidateVolumeCapabilitiesResponse{Confirmed: &csipb.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: r.GetVolumeContext(), VolumeCapabilities: r.GetVolumeCapabilities(), Parameters: r.GetParameters()}}, nil
}

// ListVolumes pages through the ready volumes in name order.
func (d *Driver) ListVolumes(ctx context.Context, r *csipb.ListVolumesRequest) (*csipb.ListVolumesResponse, error) {
	if r.GetMaxEntries() < 0 {
		return nil, status.Error(codes.InvalidArgument, "max_entries is negative")
	}
	after := ""
	if tok := r.GetStartingToken(); tok != "" {
		var ok bool
		if after, ok = strings.CutPrefix(tok, "after:"); !ok {
			return nil, status.Errorf(codes.Aborted, "starting token %q is not one ListVolumes gave", tok)
		}
	}
	vols, err := d.o.Store.Volumes(ctx)
	if err != nil {
		return nil, grpcError(err)
	}
	slices.SortFunc(vols, func(a, b *meta.VolumeRecord) int { return strings.Compare(a.Name, b.Name) })
	rep := &csipb.ListVolumesResponse{}
	for _, v := range vols {
		if v.State != meta.VolumeReady || v.Name <= after {
			continue
		}
		if n := r.GetMaxEntries(); n > 0 && len(rep.Entries) == int(n) {
			rep.NextToken = "after:" + rep.Entries[n-1].Volume.VolumeId
			break
		}
		rep.Entries = append(rep.Entries, &csipb.ListVolumesResponse_Entry{Volume: &csipb.Volume{VolumeId: v.Name, CapacityBytes: v.Size}})
	}
	return rep, nil
}

// GetCapacity is what thin volumes of the class's layout may still
// promise (see the package doc).
func (d *Driver) GetCapacity(ctx context.Context, r *csipb.GetCapacityRequest) (*csipb.GetCapacityResponse, error) {
	if err := checkCapabilities(r.GetVolumeCapabilities()); len(r.GetVolumeCapabilities()) > 0 && err != nil {
		return &csipb.GetCapacityResponse{}, nil
	}
	p, err := parseParams(r.GetParameters())
	if err != nil {
		return nil, err
	}
	in, limit, err := capacity.Load(ctx, d.o.Store)
	if err != nil {
		return nil, grpcError(err)
	}
	rep, err := capacity.Compute(in)
	if err != nil {
		return nil, grpcError(err)
	}
	raw := int64(limit*float64(rep.Usable)) - rep.Promised
	avail := max(0, raw/int64(p.K+p.M)*int64(p.K))
	return &csipb.GetCapacityResponse{AvailableCapacity: avail}, nil
}

// ControllerExpandVolume grows a volume (`volume resize`); a volume already
// that large is success.
func (d *Driver) ControllerExpandVolume(ctx context.Context, r *csipb.ControllerExpandVolumeRequest) (*csipb.ControllerExpandVolumeResponse, error) {
	id := r.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume id is required")
	}
	if r.GetCapacityRange() == nil {
		return nil, status.Error(codes.InvalidArgument, "a capacity range is required")
	}
	size, err := requestedSize(r.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	defer d.locks.lock(id)()
	rec, err := d.o.Store.Volume(ctx, id)
	if err != nil {
		return nil, grpcError(err)
	}
	if rec.Size < size {
		if rec, _, err = capacity.ResizeVolume(ctx, d.o.Store, id, size); err != nil {
			return nil, grpcError(err)
		}
	}
	block := r.GetVolumeCapability().GetBlock() != nil
	return &csipb.ControllerExpandVolumeResponse{CapacityBytes: rec.Size, NodeExpansionRequired: !block}, nil
}

// ControllerModifyVolume changes a live volume's QoS limits to those of
// its VolumeAttributesClass (`volume set --qos-*`): every mapping applies
// them within about a second, without a remap. Only the limits given
// change; a bad one changes nothing.
func (d *Driver) ControllerModifyVolume(ctx context.Context, r *csipb.ControllerModifyVolumeRequest) (*csipb.ControllerModifyVolumeResponse, error) {
	id := r.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume id is required")
	}
	c, err := parseMutable(r.GetMutableParameters())
	if err != nil {
		return nil, err
	}
	defer d.locks.lock(id)()
	if _, err := d.o.Store.SetVolumeQoS(ctx, id, c); err != nil {
		return nil, grpcError(err)
	}
	return &csipb.ControllerModifyVolumeResponse{}, nil
}

// checkCapabilities refuses what the driver cannot serve.
func checkCapabilities(caps []*csipb.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	for _, c := range caps {
		if err := checkCapability(c); err != nil {
			return err
		}
	}
	return nil
}

// checkCapability refuses one capability the driver cannot serve.
func checkCapability(c *csipb.VolumeCapability) error {
	if c == nil || c.GetAccessMode() == nil {
		return status.Error(codes.InvalidArgument, "a volume capability needs an access mode")
	}
	switch c.GetAccessMode().GetMode() {
	case csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, csipb.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:
	default:
		return status.Errorf(codes.InvalidArgument, "access mode %s is not supported (single-node writer and read-only modes are)", c.GetAccessMode().GetMode())
	}
	switch {
	case c.GetBlock() != nil:
	case c.GetMount() != nil:
		if fs := c.GetMount().GetFsType(); fs != "" && fs != "ext4" && fs != "xfs" {
			return status.Errorf(codes.InvalidArgument, "filesystem %q is not supported (ext4, xfs)", fs)
		}
	default:
		return status.Error(codes.InvalidArgument, "a volume capability needs an access type (block or mount)")
	}
	return nil
}

// readOnlyMode says whether c's access mode only reads.
func readOnlyMode(c *csipb.VolumeCapability) bool {
	m := c.GetAccessMode().GetMode()
	return m == csipb.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY || m == csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
}
