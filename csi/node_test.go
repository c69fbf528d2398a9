package csi

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

const (
	rwo = csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	rox = csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
)

// createVolume creates a 2+1 volume of size bytes through the controller.
func createVolume(t *testing.T, p *plugin, name string, size int64) string {
	t.Helper()
	rep, err := p.ctrl.CreateVolume(context.Background(), &csipb.CreateVolumeRequest{Name: name,
		CapacityRange:      &csipb.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csipb.VolumeCapability{capability(false, rwo)},
		Parameters:         map[string]string{"k": "2", "m": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	return rep.GetVolume().GetVolumeId()
}

// paths are a node's staging and target paths of a volume; what is left
// mounted there when the test ends is detached.
type paths struct{ staging, target string }

func newPaths(t *testing.T) paths {
	dir := t.TempDir()
	p := paths{staging: filepath.Join(dir, "staging"), target: filepath.Join(dir, "target")}
	t.Cleanup(func() {
		for _, path := range []string{p.target, filepath.Join(p.staging, blockFile), p.staging} {
			for {
				if m, err := mountAt(path); err != nil || m == nil || unix.Unmount(path, unix.MNT_DETACH) != nil {
					break
				}
			}
		}
	})
	return p
}

func (p *plugin) stage(vol string, at paths, c *csipb.VolumeCapability) error {
	_, err := p.node.NodeStageVolume(context.Background(), &csipb.NodeStageVolumeRequest{VolumeId: vol,
		StagingTargetPath: at.staging, VolumeCapability: c})
	return err
}

func (p *plugin) publish(vol string, at paths, c *csipb.VolumeCapability, ro bool) error {
	_, err := p.node.NodePublishVolume(context.Background(), &csipb.NodePublishVolumeRequest{VolumeId: vol,
		StagingTargetPath: at.staging, TargetPath: at.target, VolumeCapability: c, Readonly: ro})
	return err
}

// release unpublishes and unstages vol (at the end of a test, before its
// agent stops).
func (p *plugin) release(t *testing.T, vol string, at paths) {
	t.Helper()
	ctx := context.Background()
	if _, err := p.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: at.target}); err != nil {
		t.Error(err)
	}
	if _, err := p.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: at.staging}); err != nil {
		t.Error(err)
	}
}

// writeSynced writes data to path, a new file, and fsyncs it.
func writeSynced(t *testing.T, path string, data []byte) {
	t.Helper()
	writeSyncedAt(t, path, os.O_CREATE|os.O_TRUNC, data, 0)
}

// writeSyncedAt writes data at off of path, opened write-only with flag,
// and fsyncs it.
func writeSyncedAt(t *testing.T, path string, flag int, data []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|flag, 0o666)
	if err == nil {
		_, err = f.WriteAt(data, off)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// readDirect reads path with O_DIRECT: from the device, not from pages the
// kernel cached.
func readDirect(path string, n int) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // page-aligned
	if err != nil {
		return nil, err
	}
	defer unix.Munmap(buf)
	got, err := unix.Pread(fd, buf, 0)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(buf[:got]), nil
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
}

// TestStageSurvivesRestarts stages and publishes a volume, writes a file,
// kills the agent (a process of its own) and stops the node plugin, starts
// both again, and reads the file back from the device through the same
// target path. On this machine the volume is mapped the FUSE + loop way,
// whose loop device dies with the agent; the restarted plugin heals the
// mounts onto a new one.
func TestStageSurvivesRestarts(t *testing.T) {
	needNode(t)
	c := startCluster(t)
	a := c.startAgentProcess(t, "node-r")
	state := t.TempDir()
	p := c.startPlugin(t, "node-r", a.socket, state)
	vol := createVolume(t, p, "restart", 64<<20)
	at, capab := newPaths(t), capability(false, rwo)
	if err := p.stage(vol, at, capab); err != nil {
		t.Fatal(err)
	}
	if err := p.publish(vol, at, capab, false); err != nil {
		t.Fatal(err)
	}
	want := randomBytes(t, 256<<10)
	file := filepath.Join(at.target, "data")
	writeSynced(t, file, want)

	p.stop()
	a.stop(syscall.SIGKILL)
	if _, err := readDirect(file, len(want)); err == nil {
		t.Fatal("the file still reads with its agent killed: the test does not kill what serves it")
	}
	a.start()
	p = c.startPlugin(t, "node-r", a.socket, state)
	t.Cleanup(func() { p.release(t, vol, at) })
	waitFor(t, "the file to read back after the restarts", func() bool {
		got, err := readDirect(file, len(want))
		return err == nil && bytes.Equal(got, want)
	})
	// kubelet may stage and publish again: nothing changes.
	if err := p.stage(vol, at, capab); err != nil {
		t.Fatal(err)
	}
	if err := p.publish(vol, at, capab, false); err != nil {
		t.Fatal(err)
	}
	writeSynced(t, filepath.Join(at.target, "after"), want)
	if got, err := readDirect(file, len(want)); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after staging again: %v (equal %t)", err, bytes.Equal(got, want))
	}
}

// TestReadOnlyManyTwoNodes writes a file on one node, then publishes the
// volume read-only on two other nodes (each its own agent and plugin),
// which both read it and cannot write; a second read-write node is refused
// while the first holds the volume, and a read-only stage of a blank volume
// makes no filesystem.
func TestReadOnlyManyTwoNodes(t *testing.T) {
	needNode(t)
	c := startCluster(t)
	var nodes []*plugin
	for _, name := range []string{"node-w", "node-r1", "node-r2"} {
		a := c.startAgent(t, name)
		nodes = append(nodes, c.startPlugin(t, name, a.o.Socket, t.TempDir()))
	}
	w := nodes[0]
	vol := createVolume(t, w, "weights", 64<<20)
	blank := createVolume(t, w, "blank", 64<<20)
	if err := nodes[1].stage(blank, newPaths(t), capability(false, rox)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("read-only stage of a blank volume: %v, want FailedPrecondition", err)
	}

	at, rw := newPaths(t), capability(false, rwo)
	if err := w.stage(vol, at, rw); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "a second node's read-write stage", nodes[1].stage(vol, newPaths(t), rw), codes.FailedPrecondition)
	wantCode(t, "another volume staged on the same path", w.stage(blank, at, rw), codes.AlreadyExists)
	if err := w.publish(vol, at, rw, false); err != nil {
		t.Fatal(err)
	}
	want := randomBytes(t, 128<<10)
	writeSynced(t, filepath.Join(at.target, "weights"), want)
	w.release(t, vol, at)

	ro := capability(false, rox)
	for i, n := range nodes[1:] {
		at := newPaths(t)
		if err := n.stage(vol, at, ro); err != nil {
			t.Fatalf("reader %d: %v", i, err)
		}
		if err := n.publish(vol, at, ro, true); err != nil {
			t.Fatalf("reader %d: %v", i, err)
		}
		t.Cleanup(func() { n.release(t, vol, at) })
		if got, err := readDirect(filepath.Join(at.target, "weights"), len(want)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("reader %d: %v (equal %t)", i, err, bytes.Equal(got, want))
		}
		if err := os.WriteFile(filepath.Join(at.target, "x"), want, 0o644); !errors.Is(err, unix.EROFS) {
			t.Fatalf("reader %d wrote: %v, want EROFS", i, err)
		}
	}
}

// TestExpandMounted grows a volume whose filesystem is mounted and
// published: the controller grows the volume, the node the filesystem,
// online, and the file written before still reads back.
// ext4 grows online only with CAP_SYS_RESOURCE, which containers often
// drop (the kernel answers EPERM): that case is skipped, xfs runs.
func TestExpandMounted(t *testing.T) {
	needNode(t)
	c := startCluster(t)
	a := c.startAgent(t, "node-x")
	p := c.startPlugin(t, "node-x", a.o.Socket, t.TempDir())
	for _, fs := range []string{"ext4", "xfs"} {
		t.Run(fs, func(t *testing.T) {
			switch {
			case fs == "ext4" && !hasCapability(unix.CAP_SYS_RESOURCE):
				t.Skip("growing a mounted ext4 needs CAP_SYS_RESOURCE, which this process lacks")
			case fs == "xfs" && !haveTool("mkfs.xfs"):
				t.Skip("mkfs.xfs not installed (apt-get install xfsprogs)")
			}
			testExpandMounted(t, c, p, fs)
		})
	}
}

func testExpandMounted(t *testing.T, c *cluster, p *plugin, fs string) {
	// xfs wants 300 MiB at least; the volume is thin.
	vol := createVolume(t, p, "grow-"+fs, 320<<20)
	at, capab := newPaths(t), capability(false, rwo)
	capab.GetMount().FsType = fs
	if err := p.stage(vol, at, capab); err != nil {
		t.Fatal(err)
	}
	if err := p.publish(vol, at, capab, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.release(t, vol, at) })
	want := randomBytes(t, 64<<10)
	writeSynced(t, filepath.Join(at.target, "data"), want)
	var before unix.Statfs_t
	if err := unix.Statfs(at.target, &before); err != nil {
		t.Fatal(err)
	}

	ctx, size := context.Background(), int64(512<<20)
	rep, err := p.ctrl.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{VolumeId: vol,
		CapacityRange: &csipb.CapacityRange{RequiredBytes: size}, VolumeCapability: capab})
	if err != nil {
		t.Fatal(err)
	}
	if rep.GetCapacityBytes() != size || !rep.GetNodeExpansionRequired() {
		t.Fatalf("ControllerExpandVolume: %v", rep)
	}
	nrep, err := p.node.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{VolumeId: vol, VolumePath: at.target,
		StagingTargetPath: at.staging, CapacityRange: &csipb.CapacityRange{RequiredBytes: size}, VolumeCapability: capab})
	if err != nil {
		t.Fatal(err)
	}
	if nrep.GetCapacityBytes() < size {
		t.Fatalf("NodeExpandVolume: %d bytes, want %d", nrep.GetCapacityBytes(), size)
	}
	var after unix.Statfs_t
	if err := unix.Statfs(at.target, &after); err != nil {
		t.Fatal(err)
	}
	if grown := int64(after.Blocks) * after.Bsize; grown < int64(before.Blocks)*before.Bsize+100<<20 {
		t.Fatalf("filesystem has %d bytes after the expand, %d before", grown, int64(before.Blocks)*before.Bsize)
	}
	if got, err := readDirect(filepath.Join(at.target, "data"), len(want)); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the expand: %v (equal %t)", err, bytes.Equal(got, want))
	}
}

// TestNeverFormatsData stages a volume as a raw block device, writes
// bytes no tool recognises, and then refuses to stage it with a
// filesystem: the bytes are still there, read through the device of a
// read-only stage, published.
func TestNeverFormatsData(t *testing.T) {
	needNode(t)
	c := startCluster(t)
	a := c.startAgent(t, "node-d")
	p := c.startPlugin(t, "node-d", a.o.Socket, t.TempDir())
	vol := createVolume(t, p, "raw", 64<<20)
	at, block := newPaths(t), capability(true, rwo)
	if err := p.stage(vol, at, block); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(at.staging, blockFile)
	want := randomBytes(t, 4096)
	writeSyncedAt(t, dev, 0, want, 8192)
	if _, err := p.node.NodeUnstageVolume(context.Background(), &csipb.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: at.staging}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "a filesystem stage of a device holding data", p.stage(vol, at, capability(false, rwo)), codes.FailedPrecondition)
	roBlock := capability(true, rox)
	if err := p.stage(vol, at, roBlock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.release(t, vol, at) })
	if err := p.stage(vol, at, roBlock); err != nil {
		t.Fatalf("staging again: %v", err)
	}
	wantCode(t, "a read-only publish with a writer mode", p.publish(vol, at, block, true), codes.FailedPrecondition)
	if err := p.publish(vol, at, roBlock, true); err != nil {
		t.Fatal(err)
	}
	st, err := p.node.NodeGetVolumeStats(context.Background(), &csipb.NodeGetVolumeStatsRequest{VolumeId: vol, VolumePath: at.target})
	if err != nil || len(st.GetUsage()) != 1 || st.GetUsage()[0].GetTotal() != 64<<20 {
		t.Fatalf("stats of the published block device: %v %v", st, err)
	}
	if f, err := os.OpenFile(at.target, os.O_WRONLY, 0); err == nil {
		_, err = f.WriteAt(want, 0)
		f.Close()
		if !errors.Is(err, unix.EPERM) {
			t.Fatalf("writing the device of a read-only stage: %v, want EPERM", err)
		}
	}
	got := make([]byte, len(want))
	f, err := os.Open(at.target) // the published device: the same bytes
	if err == nil {
		_, err = f.ReadAt(got, 8192)
		f.Close()
	}
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the data: %v (equal %t)", err, bytes.Equal(got, want))
	}
}

// hasCapability says whether this process has capability c in effect.
func hasCapability(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[c/32].Effective&(1<<(c%32)) != 0
}

func haveTool(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

// TestModifyVolumeLive: a volume staged with the StorageClass's QoS limits
// gets the VolumeAttributesClass's new ones from ControllerModifyVolume
// while it stays staged: the agent's mapping applies them without a remap.
func TestModifyVolumeLive(t *testing.T) {
	needNode(t)
	c := startCluster(t)
	a := c.startAgent(t, "node-qos")
	p := c.startPlugin(t, "node-qos", a.o.Socket, t.TempDir())
	ctx := context.Background()
	capab := capability(true, rwo)
	rep, err := p.ctrl.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: "qos-live",
		CapacityRange:      &csipb.CapacityRange{RequiredBytes: 16 << 20},
		VolumeCapabilities: []*csipb.VolumeCapability{capab},
		Parameters:         map[string]string{"k": "2", "m": "1", "qosIOPS": "1000", "qosWriteBPS": "64MiB/s"}})
	if err != nil {
		t.Fatal(err)
	}
	vol, at := rep.GetVolume().GetVolumeId(), newPaths(t)
	if err := p.stage(vol, at, capab); err != nil {
		t.Fatal(err)
	}
	defer p.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: at.staging})
	waitLimits(t, a, vol, map[string]float64{"iops": 1000, "write_bps": 64 << 20, "read_iops": 0})

	if _, err := p.ctrl.ControllerModifyVolume(ctx, &csipb.ControllerModifyVolumeRequest{VolumeId: vol,
		MutableParameters: map[string]string{"qosIOPS": "250", "qosReadIOPS": "100"}}); err != nil {
		t.Fatal(err)
	}
	waitLimits(t, a, vol, map[string]float64{"iops": 250, "write_bps": 64 << 20, "read_iops": 100})
	if m, err := p.d.mapping(ctx, vol); err != nil || m == nil {
		t.Errorf("the volume is no longer mapped after the modify: %v %v", m, err)
	}
}

// waitLimits waits until the agent's qos_limit gauges of vol show want
// (the agent follows the volume record about once a second).
func waitLimits(t *testing.T, a *nodeAgent, vol string, want map[string]float64) {
	t.Helper()
	testutil.WaitFor(t, fmt.Sprintf("volume %s: QoS limits %v", vol, want), func() bool {
		have := qosLimits(t, a, vol)
		ok := len(have) > 0
		for k, v := range want {
			ok = ok && have[k] == v
		}
		return ok
	})
}

// qosLimits reads the agent's qos_limit gauges of vol, by limit name.
func qosLimits(t *testing.T, a *nodeAgent, vol string) map[string]float64 {
	t.Helper()
	fams, err := a.agent.Metrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "nvstripe_agent_qos_limit" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["volume"] == vol {
				have[labels["limit"]] = m.GetGauge().GetValue()
			}
		}
	}
	return have
}
