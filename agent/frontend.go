package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/fuse"
	"github.com/nvstripe/nvstripe/nbd"
	"github.com/nvstripe/nvstripe/ublk"
)

// frontend is how a mapping is served: an NBD listener, a kernel nbd device
// or a FUSE mount.
type frontend interface {
	// url is what clients use.
	url() string
	// where is the resolved Spec.Where (a TCP port 0 becomes the port).
	where() string
	// close stops serving; the device is not closed. It fails, and keeps
	// serving, when a FUSE file is still in use.
	close() error
	// ended is closed once the frontend has stopped serving by itself: its
	// kernel device was disconnected or stopped by someone else (or close
	// was called). nil: it never stops by itself.
	ended() <-chan struct{}
	// resize tells the frontend's clients that the served device now has
	// size bytes (it grew). NBD listeners read the size anew at the next
	// handshake; a kernel nbd device is told; the kernel drops what it
	// cached of a FUSE file's attributes (fuse.FS.Resized: the next stat
	// shows the size; a loop device over the file takes it at losetup
	// --set-capacity); a ublk device keeps its size (ublkDevice.resize).
	resize(size int64) error
}

// startFrontend serves dev as spec asks.
func startFrontend(ctx context.Context, spec Spec, dev blockdev.Device, o *Options) (frontend, error) {
	logf := o.Logf
	dev = mutate(dev)
	switch spec.Via {
	case ViaNBDListen, ViaNBDDevice:
		no := nbd.Options{Logf: logf, Refused: o.Metrics.nbdRefused(spec.Volume), Exports: map[string]nbd.Export{
			spec.Volume: {Device: dev, ReadOnly: spec.ReadOnly, Description: "nvstripe volume " + spec.Volume},
		}}
		if spec.Via == ViaNBDListen {
			no.TLS, no.RequireTLS = o.NBDTLS, o.NBDRequireTLS
		}
		srv, err := nbd.NewServer(no)
		if err != nil {
			return nil, err
		}
		if spec.Via == ViaNBDDevice {
			return attachKernel(ctx, srv, spec)
		}
		return listenNBD(srv, spec, logf)
	case ViaUblk:
		return startUblk(spec, dev, o)
	case ViaFUSE:
		return mountFUSE(spec, dev, logf)
	}
	return nil, spec.Validate()
}

// nbdListener serves NBD on a listener.
type nbdListener struct {
	srv    *nbd.Server
	addr   string // resolved Where
	link   string
	served chan struct{} // closed when Serve has returned
}

func listenNBD(srv *nbd.Server, spec Spec, logf func(string, ...any)) (*nbdListener, error) {
	network, addr := "tcp", spec.Where
	if p, ok := strings.CutPrefix(spec.Where, "unix:"); ok {
		network, addr = "unix", p
		removeStaleSocket(p)
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("NBD listener: %w", err)
	}
	f := &nbdListener{srv: srv, addr: spec.Where, served: make(chan struct{})}
	if network == "tcp" {
		f.addr = l.Addr().String()
		f.link = "nbd://" + f.addr + "/" + spec.Volume
	} else {
		f.link = "nbd+unix:///" + spec.Volume + "?socket=" + addr
	}
	go func() {
		defer close(f.served)
		if err := srv.Serve(context.Background(), l); err != nil {
			logf("agent: %s: NBD listener %s stopped: %v", spec.Volume, f.addr, err)
		}
	}()
	return f, nil
}

// removeStaleSocket removes a unix socket file nobody listens on (left by a
// crashed agent), so that listening on it works again.
func removeStaleSocket(path string) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close() // someone serves it: leave it, Listen will say so
		return
	}
	os.Remove(path)
}

func (f *nbdListener) url() string            { return f.link }
func (f *nbdListener) where() string          { return f.addr }
func (f *nbdListener) ended() <-chan struct{} { return nil }
func (f *nbdListener) resize(int64) error     { return nil }

// close stops the server and waits for its Serve loop. It may be called
// again (after an unmap that failed further on): Serve's end is a closed
// channel, not a value only the first call would receive. How Serve ended
// was logged when it did; it is no reason to refuse the unmap.
func (f *nbdListener) close() error {
	err := f.srv.Close()
	<-f.served
	return err
}

// nbdKernel is an export attached to /dev/nbdN.
type nbdKernel struct {
	srv *nbd.Server
	att *nbd.Attachment
}

func attachKernel(ctx context.Context, srv *nbd.Server, spec Spec) (*nbdKernel, error) {
	att, err := srv.AttachKernel(ctx, spec.Volume, spec.Where, nbd.AttachOptions{BackendID: spec.Volume})
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("attaching to %s: %w", spec.Where, err)
	}
	return &nbdKernel{srv: srv, att: att}, nil
}

func (f *nbdKernel) url() string             { return f.att.Path }
func (f *nbdKernel) where() string           { return f.att.Path }
func (f *nbdKernel) close() error            { return errors.Join(f.att.Close(), f.srv.Close()) }
func (f *nbdKernel) ended() <-chan struct{}  { return f.att.Done() }
func (f *nbdKernel) resize(size int64) error { return f.att.Resize(size) }

// ublkDevice serves the volume as /dev/ublkbN.
type ublkDevice struct{ srv *ublk.Server }

func startUblk(spec Spec, dev blockdev.Device, o *Options) (*ublkDevice, error) {
	// An agent that keeps its mappings adds devices with user recovery: one
	// killed leaves its devices quiesced, holding IO, and the restarted
	// agent takes them back (spec.Where names the device) instead of
	// adding new ones under a mounted file system.
	uo := &ublk.Options{ReadOnly: spec.ReadOnly, Recovery: o.StateDir != ""}
	if id, ok := ublkID(spec.Where); ok && uo.Recovery {
		srv, err := ublk.Recover(context.Background(), id, dev, uo)
		if err == nil {
			o.Logf("agent: %s: took %s back (ublk user recovery)", spec.Volume, srv.Path())
			return &ublkDevice{srv: srv}, nil
		}
		o.Logf("agent: %s: taking %s back: %v; adding a new device", spec.Volume, spec.Where, err)
	}
	// The device lives until close, not until the caller's context ends.
	srv, err := ublk.Start(context.Background(), dev, uo)
	if err != nil {
		return nil, fmt.Errorf("ublk device: %w", err)
	}
	return &ublkDevice{srv: srv}, nil
}

// ublkID returns N of /dev/ublkbN.
func ublkID(path string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(path, "/dev/ublkb"))
	return n, err == nil && n >= 0 && strings.HasPrefix(path, "/dev/ublkb")
}

func (f *ublkDevice) url() string            { return f.srv.Path() }
func (f *ublkDevice) where() string          { return f.srv.Path() }
func (f *ublkDevice) close() error           { return f.srv.Close() }
func (f *ublkDevice) ended() <-chan struct{} { return f.srv.Done() }

// resize fails: the ublk driver changes a live device's size only from
// Linux 6.16 (UBLK_CMD_UPDATE_SIZE), which package ublk does not speak.
func (f *ublkDevice) resize(size int64) error {
	return fmt.Errorf("%s keeps its size: this ublk driver cannot change a live device's size; unmap and map the volume again to see %d bytes", f.srv.Path(), size)
}

// fuseMount shows the volume as DIR/VOLUME.
type fuseMount struct {
	fs   *fuse.FS
	file string
	dir  string
}

func mountFUSE(spec Spec, dev blockdev.Device, logf func(string, ...any)) (*fuseMount, error) {
	if err := os.MkdirAll(spec.Where, 0o755); err != nil {
		return nil, fmt.Errorf("FUSE directory: %w", err)
	}
	fs, err := fuse.Mount(spec.Where, map[string]blockdev.Device{spec.Volume: dev},
		&fuse.Options{ReadOnly: spec.ReadOnly, FsName: "nvstripe:" + spec.Volume, Logf: logf})
	if err != nil {
		return nil, fmt.Errorf("FUSE mount at %s: %w", spec.Where, err)
	}
	return &fuseMount{fs: fs, dir: spec.Where, file: filepath.Join(spec.Where, spec.Volume)}, nil
}

func (f *fuseMount) url() string            { return f.file }
func (f *fuseMount) where() string          { return f.dir }
func (f *fuseMount) ended() <-chan struct{} { return nil }
func (f *fuseMount) resize(int64) error {
	return f.fs.Resized(filepath.Base(f.file))
}
func (f *fuseMount) close() error {
	if err := f.fs.Unmount(); err != nil {
		return fmt.Errorf("unmounting %s (is %s still in use, e.g. by a loop device?): %w", f.dir, f.file, err)
	}
	return nil
}
