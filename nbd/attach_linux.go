//go:build linux

package nbd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nvstripe/nvstripe/internal/rawsock"
	"github.com/nvstripe/nvstripe/internal/retry"
)

// Attachment is an export attached to a kernel nbd device.
type Attachment struct {
	// Path is the device node, /dev/nbdN.
	Path  string
	index int
	srv   *Server
	exp   *export
	opts  AttachOptions

	ctx     context.Context // ends at Close; the connections' lifetime
	stop    context.CancelFunc
	live    atomic.Bool // the kernel holds the device for us
	closing atomic.Bool
	conns   sync.WaitGroup
	done    chan struct{}
	once    sync.Once
	err     error

	mu         sync.Mutex
	serving    map[int]net.Conn // each slot's connection now
	reconnects atomic.Int64
}

// AttachKernel connects the export to the kernel's nbd driver as devPath
// ("/dev/nbdN", or "" for the first free device) over opts.Connections
// socket pairs: the kernel gets one end of each, the server serves the other
// in transmission mode with simple replies (the kernel has no handshake and
// no structured replies). ctx bounds the attaching only: the connections
// are served until Close, the server's Close, or a disconnect by someone
// else (Done). A connection whose server side ends while the device is
// still connected is replaced (NBD_CMD_RECONFIGURE). A device already
// connected is refused with ErrDeviceBusy while the process that connected
// it lives; once it has died, a device with the same backend (opts.BackendID)
// is taken over: its dead connections get fresh sockets, and IO held by the
// kernel (AttachOptions.DeadConnTimeout) goes on. Needs CAP_SYS_ADMIN and the
// nbd module; without the module the error is ErrNoKernelNBD.
func (s *Server) AttachKernel(ctx context.Context, export, devPath string, opts AttachOptions) (*Attachment, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	opts.ensureDefaults(export)
	index, err := parseDevPath(devPath)
	if err != nil {
		return nil, err
	}
	e := s.lookup(export)
	if e == nil {
		return nil, fmt.Errorf("nbd: no export %q", export)
	}
	c, fam, err := dialNBD()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	a := &Attachment{srv: s, exp: e, opts: opts, done: make(chan struct{})}
	a.ctx, a.stop = context.WithCancel(context.WithoutCancel(ctx))
	if index < 0 {
		err = a.connectFree(c, fam)
	} else {
		err = a.connectAt(c, fam, index)
	}
	if err != nil {
		a.stop()
		a.conns.Wait()
		return nil, err
	}
	go func() {
		a.conns.Wait()
		close(a.done)
	}()
	return a, nil
}

// connectFree connects the first free device, trying the next when another
// process takes it first.
func (a *Attachment) connectFree(c *genetlink.Conn, fam genetlink.Family) error {
	skip := map[int]bool{}
	for range 8 {
		d, err := freeDevice(sysBlock, skip)
		if err != nil {
			return err
		}
		err = a.connect(c, fam, d.Index)
		if !errors.Is(err, ErrDeviceBusy) {
			return err
		}
		skip[d.Index] = true
	}
	return fmt.Errorf("nbd: other processes took every free device first: %w", ErrDeviceBusy)
}

// connectAt connects device index, or takes it over when its server
// process has died.
func (a *Attachment) connectAt(c *genetlink.Conn, fam genetlink.Family, index int) error {
	d, err := readDevice(sysBlock, index)
	if err != nil && !errors.Is(err, ErrNoDevice) {
		return err
	}
	if err != nil || !d.Connected() {
		return a.connect(c, fam, index)
	}
	if err := checkAttachable(d, a.opts.BackendID); err != nil {
		return err
	}
	return a.takeOver(c, fam, d)
}

// CheckAttachable says whether AttachKernel could attach backend (the
// volume name) to path (/dev/nbdN) now: nil when the device is free, or
// connected to backend by a process that has died (it is taken over);
// ErrDeviceBusy, saying by whom, when a live process serves it or it is
// connected to another backend. A device that does not exist yet is free
// (the kernel creates it).
func CheckAttachable(path, backend string) error {
	d, err := Device(path)
	if errors.Is(err, ErrNoDevice) {
		return nil
	}
	if err != nil || !d.Connected() {
		return err
	}
	return checkAttachable(d, backend)
}

// PickDevice returns the device that attaching backend (the volume name)
// by default should use: the one still connected to backend by a process
// that has died (AttachKernel takes it over, and IO the kernel held goes
// on), else the first free one (FreeDevice). A device that a live process
// serves for backend is ErrDeviceBusy: the volume is mapped already.
func PickDevice(backend string) (DeviceInfo, error) {
	ds, err := Devices()
	if err != nil {
		return DeviceInfo{}, err
	}
	for _, d := range ds {
		if d.Connected() && d.Backend == backend {
			if err := checkAttachable(d, backend); err != nil {
				return d, err
			}
			return d, nil
		}
	}
	return FreeDevice()
}

func checkAttachable(d DeviceInfo, backend string) error {
	if pid, args := d.server(); pid != 0 {
		return fmt.Errorf("nbd: %s is in use: served by process %d (%s) for backend %q: %w",
			d.Path, pid, strings.Join(args, " "), d.Backend, ErrDeviceBusy)
	}
	if d.Backend != backend {
		return fmt.Errorf("nbd: %s is still connected to backend %q, whose process %d has died; disconnect it first (nvstripe unmap %s): %w",
			d.Path, d.Backend, d.PID, d.Path, ErrDeviceBusy)
	}
	return nil
}

// connect hands the kernel fresh sockets for device index (NBD_CMD_CONNECT).
func (a *Attachment) connect(c *genetlink.Conn, fam genetlink.Family, index int) error {
	kfds, ncs, err := newPairs(a.opts.Connections)
	if err != nil {
		return err
	}
	a.serve(ncs) // before the kernel can send anything
	req := connectRequest{
		index: index, size: uint64(a.exp.Device.Size()), blockSize: uint64(a.exp.Device.BlockSize()),
		flags: uint64(a.exp.flags(false)), fds: kfds, timeout: a.opts.Timeout, deadConn: a.opts.DeadConnTimeout,
		backendID: a.opts.BackendID, // no DISCONNECT_ON_CLOSE: the first mkfs or blkid to close it would disconnect it
	}
	a.index, err = execConnect(c, fam, req)
	closeFDs(kfds) // the kernel holds its own references
	if err != nil {
		closeConns(ncs) // the kernel never got or has dropped its ends; the attachment may try another device
		return err
	}
	os.Remove(takeOverFile(a.index)) // the kernel's pid attribute names us
	a.setLive()
	return nil
}

// takeOverDir keeps, per device, the process that took it over
// (nbdN.pid): the kernel's pid attribute keeps naming the thread that
// connected it first.
const takeOverDir = "/run/nvstripe"

func takeOverFile(index int) string {
	return filepath.Join(takeOverDir, fmt.Sprintf("nbd%d.pid", index))
}

// recordTakeOver writes takeOverFile; failing to only costs the liveness
// check its second source, so it is logged.
func (a *Attachment) recordTakeOver() {
	err := os.MkdirAll(takeOverDir, 0o755)
	if err == nil {
		err = os.WriteFile(takeOverFile(a.index), fmt.Appendf(nil, "%d\n", os.Getpid()), 0o644)
	}
	if err != nil {
		a.srv.opts.Logf("nbd: %s: recording this process as its server: %v", a.Path, err)
	}
}

// forgetTakeOver removes takeOverFile if it names this process.
func (a *Attachment) forgetTakeOver() {
	if b, err := os.ReadFile(takeOverFile(a.index)); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(os.Getpid()) {
		os.Remove(takeOverFile(a.index))
	}
}

// takeOver replaces the dead connections of device d, connected with our
// backend by a process that has died (NBD_CMD_RECONFIGURE).
func (a *Attachment) takeOver(c *genetlink.Conn, fam genetlink.Family, d DeviceInfo) error {
	if d.Size != a.exp.Device.Size() {
		return fmt.Errorf("nbd: %s has size %d, the export %d: %w", d.Path, d.Size, a.exp.Device.Size(), ErrDeviceBusy)
	}
	kfds, ncs, err := newPairs(a.opts.Connections)
	if err != nil {
		return err
	}
	err = execReconfigure(c, fam, d.Index, kfds, a.opts)
	closeFDs(kfds)
	if err != nil {
		closeConns(ncs)
		return err
	}
	var taken []net.Conn
	for _, nc := range ncs {
		if peerClosed(nc) {
			nc.Close()
		} else {
			taken = append(taken, nc)
		}
	}
	if len(taken) == 0 {
		return fmt.Errorf("nbd: %s has no dead connection to replace: another process serves it: %w", d.Path, ErrDeviceBusy)
	}
	a.index = d.Index
	a.setLive()
	a.recordTakeOver()
	a.serve(taken)
	a.srv.opts.Logf("nbd: %s: took over %d connection(s) from process %d", d.Path, len(taken), d.PID)
	return nil
}

func (a *Attachment) setLive() {
	a.Path = fmt.Sprintf("/dev/nbd%d", a.index)
	a.live.Store(true)
}

// newPairs makes n socket pairs and returns the kernel's ends and ours. The
// kernel's ends stay blocking and out of Go's poller: they are plain
// descriptors, closed once the kernel has them.
func newPairs(n int) ([]int, []net.Conn, error) {
	var kfds []int
	var ncs []net.Conn
	for range n {
		kfd, nc, err := newPair()
		if err != nil {
			closeFDs(kfds)
			closeConns(ncs)
			return nil, nil, err
		}
		kfds, ncs = append(kfds, kfd), append(ncs, nc)
	}
	return kfds, ncs, nil
}

// serve serves each of ncs as a connection slot.
func (a *Attachment) serve(ncs []net.Conn) {
	for i, nc := range ncs {
		a.conns.Go(func() { a.serveSlot(i, nc) })
	}
}

func closeConns(ncs []net.Conn) {
	for _, nc := range ncs {
		nc.Close()
	}
}

// newPair returns a connected unix socket pair: a blocking descriptor for
// the kernel and a net.Conn for the server.
func newPair() (int, net.Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("nbd: socketpair: %w", err)
	}
	f := os.NewFile(uintptr(fds[1]), "nbd-server")
	nc, err := net.FileConn(f) // a duplicate, made non-blocking for the poller
	f.Close()
	if err != nil {
		unix.Close(fds[0])
		return 0, nil, fmt.Errorf("nbd: socket pair conn: %w", err)
	}
	return fds[0], nc, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// Replacing a connection is retried this many times, with a pause that
// doubles from replaceFirstWait, before the slot gives up.
const (
	replaceTries     = 6
	replaceFirstWait = 100 * time.Millisecond
)

// serveSlot serves connection i and, while the device stays connected,
// replaces it each time its server side ends.
func (a *Attachment) serveSlot(i int, nc net.Conn) {
	for {
		a.setServing(i, nc)
		if err := a.srv.serveKernelConn(a.ctx, nc, a.exp); err != nil {
			a.srv.opts.Logf("nbd: kernel connection %d of %s: %v", i, a.exp.name, err)
		}
		if !a.stillServing() {
			return
		}
		a.srv.opts.Logf("nbd: kernel connection %d of %s ended; giving the kernel a new socket", i, a.exp.name)
		if nc = a.replace(i); nc == nil {
			return
		}
		a.reconnects.Add(1)
	}
}

func (a *Attachment) setServing(i int, nc net.Conn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.serving == nil {
		a.serving = map[int]net.Conn{}
	}
	a.serving[i] = nc
}

// Reconnects counts the connections replaced since the attachment began.
func (a *Attachment) Reconnects() int64 { return a.reconnects.Load() }

// stillServing says whether the device is still connected for us after a
// connection ended (not closed by Close, nor disconnected by someone else).
func (a *Attachment) stillServing() bool {
	if !a.live.Load() || a.closing.Load() || a.ctx.Err() != nil {
		return false
	}
	d, err := readDevice(sysBlock, a.index)
	return err == nil && d.Connected() && d.Backend == a.opts.BackendID
}

// stillOurs says whether the device is still connected with our backend:
// one that someone else disconnected (nbd-client -d) may have been
// connected again by another process, which Close must leave alone.
func (a *Attachment) stillOurs() bool {
	d, err := readDevice(sysBlock, a.index)
	return err != nil || d.Connected() && d.Backend == a.opts.BackendID
}

// replace hands the kernel a new socket for a dead connection and returns
// our end, or nil when the kernel never takes one (it has no dead
// connection left, or the device went away).
func (a *Attachment) replace(i int) net.Conn {
	waits := retry.NewBackoff(retry.Options{Initial: replaceFirstWait, Max: replaceFirstWait << (replaceTries - 1)})
	for range replaceTries {
		if retry.Sleep(a.ctx, waits.Next()) != nil {
			return nil
		}
		kfd, nc, err := newPair()
		if err == nil {
			err = reconfigure(a.index, []int{kfd}, a.opts)
			unix.Close(kfd)
		}
		if err == nil && !peerClosed(nc) {
			return nc
		}
		if nc != nil {
			nc.Close()
		}
		if err == nil {
			err = errors.New("the kernel did not take the socket (no dead connection to replace)")
		}
		a.srv.opts.Logf("nbd: replacing kernel connection %d of %s: %v", i, a.Path, err)
		if !a.stillServing() {
			return nil
		}
	}
	return nil
}

// peerClosed says whether the other end of nc is gone: after we close our
// copy of the kernel's end, it is gone at once unless the kernel holds it.
func peerClosed(nc net.Conn) bool {
	s := rawsock.New(nc)
	if s == nil {
		return true
	}
	shutWrite, _ := s.PeerGone()
	return shutWrite
}

// Done is closed when every connection has ended: after Close, or once
// someone else disconnected the device.
func (a *Attachment) Done() <-chan struct{} { return a.done }

// Close disconnects the device (NBD_CMD_DISCONNECT: the kernel sends
// NBD_CMD_DISC on each socket), waits for the server side of the sockets to
// end and for the device's size to drop to 0. It is idempotent.
func (a *Attachment) Close() error {
	a.once.Do(func() {
		a.closing.Store(true)
		if a.live.Load() && a.stillOurs() {
			a.err = disconnect(a.index)
		}
		a.stop()
		a.conns.Wait()
		if a.live.Load() && a.err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a.err = waitDisconnected(ctx, a.index)
		}
		if a.live.Load() {
			a.forgetTakeOver()
		}
	})
	return a.err
}

// Resize tells the kernel the export's device now has size bytes
// (NBD_CMD_RECONFIGURE with NBD_ATTR_SIZE_BYTES): it sets the new capacity
// and announces it (a change uevent), so that a mounted file system can
// grow (resize2fs). The export's device must already have that size.
func (a *Attachment) Resize(size int64) error {
	if !a.live.Load() {
		return fmt.Errorf("nbd: resize of an attachment that is not connected: %w", ErrNoDevice)
	}
	c, fam, err := dialNBD()
	if err != nil {
		return err
	}
	defer c.Close()
	data, err := encodeResize(a.index, uint64(size), a.opts.BackendID)
	if err != nil {
		return fmt.Errorf("nbd: encode resize: %w", err)
	}
	if _, err := execute(c, fam, genlCmdReconfigure, data); err != nil {
		return fmt.Errorf("nbd: resizing %s to %d bytes: %w", a.Path, size, err)
	}
	return nil
}

// dialNBD opens generic netlink and finds the nbd family.
func dialNBD() (*genetlink.Conn, genetlink.Family, error) {
	c, err := genetlink.Dial(nil)
	if err != nil {
		return nil, genetlink.Family{}, fmt.Errorf("nbd: generic netlink: %w", err)
	}
	fam, err := c.GetFamily(genlFamily)
	if err != nil {
		c.Close()
		if errors.Is(err, os.ErrNotExist) {
			return nil, genetlink.Family{}, ErrNoKernelNBD
		}
		return nil, genetlink.Family{}, fmt.Errorf("nbd: generic netlink family %q: %w", genlFamily, err)
	}
	return c, fam, nil
}

// execute sends one nbd command and returns the replies. The kernel's
// EBUSY (the device is connected) becomes ErrDeviceBusy.
func execute(c *genetlink.Conn, fam genetlink.Family, cmd uint8, data []byte) ([]genetlink.Message, error) {
	msg := genetlink.Message{Header: genetlink.Header{Command: cmd, Version: genlVersion}, Data: data}
	replies, err := c.Execute(msg, fam.ID, netlink.Request|netlink.Acknowledge)
	if errors.Is(err, unix.EBUSY) {
		return nil, fmt.Errorf("%w (the kernel said: %w)", ErrDeviceBusy, err)
	}
	return replies, err
}

func execConnect(c *genetlink.Conn, fam genetlink.Family, req connectRequest) (int, error) {
	data, err := encodeConnect(req)
	if err != nil {
		return 0, fmt.Errorf("nbd: encode connect: %w", err)
	}
	replies, err := execute(c, fam, genlCmdConnect, data)
	if err != nil {
		return 0, fmt.Errorf("nbd: NBD_CMD_CONNECT /dev/nbd%d: %w", req.index, err)
	}
	for _, r := range replies {
		if idx, err := decodeIndex(r.Data); err == nil {
			return idx, nil
		}
	}
	if req.index >= 0 {
		return req.index, nil
	}
	return 0, fmt.Errorf("nbd: NBD_CMD_CONNECT reply carries no device index")
}

func execReconfigure(c *genetlink.Conn, fam genetlink.Family, index int, fds []int, o AttachOptions) error {
	data, err := encodeReconfigure(index, fds, o.Timeout, o.DeadConnTimeout, o.BackendID)
	if err != nil {
		return fmt.Errorf("nbd: encode reconfigure: %w", err)
	}
	if _, err := execute(c, fam, genlCmdReconfigure, data); err != nil {
		return fmt.Errorf("nbd: NBD_CMD_RECONFIGURE /dev/nbd%d: %w", index, err)
	}
	return nil
}

func reconfigure(index int, fds []int, o AttachOptions) error {
	c, fam, err := dialNBD()
	if err != nil {
		return err
	}
	defer c.Close()
	return execReconfigure(c, fam, index, fds, o)
}

func disconnect(index int) error {
	c, fam, err := dialNBD()
	if err != nil {
		return err
	}
	defer c.Close()
	data, err := encodeDisconnect(index)
	if err != nil {
		return fmt.Errorf("nbd: encode disconnect: %w", err)
	}
	if _, err := execute(c, fam, genlCmdDisconnect, data); err != nil {
		return fmt.Errorf("nbd: NBD_CMD_DISCONNECT /dev/nbd%d: %w", index, err)
	}
	return nil
}

// pidAlive says whether thread or process pid exists.
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false // kill(0) and kill(-1) address groups
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// pollInterval is how often the waits below read sysfs.
const pollInterval = 50 * time.Millisecond

// waitDisconnected waits until device index has no connection and size 0.
func waitDisconnected(ctx context.Context, index int) error {
	for {
		d, err := readDevice(sysBlock, index)
		if err != nil || !d.Connected() && d.Size == 0 {
			return err
		}
		if err := retry.Sleep(ctx, pollInterval); err != nil {
			return fmt.Errorf("nbd: %s still connected (size %d, process %d): %w", d.Path, d.Size, d.PID, err)
		}
	}
}

// WaitSize waits until the device path (/dev/nbdN) has a size, as it does
// once a server is attached, and its device node exists.
func WaitSize(ctx context.Context, path string) (DeviceInfo, error) {
	for {
		d, err := Device(path)
		if err != nil {
			return d, err
		}
		if _, err := os.Stat(path); err == nil && d.Size > 0 {
			return d, nil
		}
		if err := retry.Sleep(ctx, pollInterval); err != nil {
			return d, fmt.Errorf("nbd: %s has no size yet: %w", path, err)
		}
	}
}

// Detach disconnects the kernel nbd device path (/dev/nbdN) whose server
// process has died, by NBD_CMD_DISCONNECT, and waits until its size is 0.
// A device that a live process serves is refused with ErrDeviceBusy naming
// it (that process unmaps its own devices: `nvstripe unmap` asks it), and
// so is a mounted device.
func Detach(ctx context.Context, path string) error {
	d, err := Device(path)
	if err != nil {
		return err
	}
	if !d.Connected() && d.Size == 0 {
		return fmt.Errorf("nbd: %s is not connected: %w", path, ErrNoDevice)
	}
	if mnt := mountPoint(path); mnt != "" {
		return fmt.Errorf("nbd: %s is mounted on %s; unmount it first: %w", path, mnt, ErrDeviceBusy)
	}
	if pid, args := d.server(); pid != 0 {
		return fmt.Errorf("nbd: %s is served by process %d (%s), which did not register it for nvstripe unmap; stop it there: %w",
			path, pid, strings.Join(args, " "), ErrDeviceBusy)
	}
	if err := disconnect(d.Index); err != nil {
		return err
	}
	return waitDisconnected(ctx, d.Index)
}

// server returns the live process that serves the device, the one that
// connected it or else the one that took it over (takeOverFile), and its
// command line; 0 when there is none (or it has died).
func (d DeviceInfo) server() (int, []string) {
	if !d.Connected() {
		return 0, nil
	}
	pid := 0
	if pidAlive(d.PID) {
		pid, _ = process(d.PID)
	} else if b, err := os.ReadFile(takeOverFile(d.Index)); err == nil {
		if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 0 && pidAlive(p) {
			pid = p
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if pid == 0 || err != nil {
		return 0, nil
	}
	return pid, strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// process returns the process (thread group) and command name of thread
// tid (the kernel's pid attribute names the thread that connected), or 0
// and "" when it is gone.
func process(tid int) (int, string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return 0, ""
	}
	var tgid int
	var comm string
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "Name":
			comm = strings.TrimSpace(v)
		case "Tgid":
			tgid, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return tgid, comm
}

// mountPoint returns where the device path is mounted ("" if nowhere).
func mountPoint(path string) string {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == path || strings.HasPrefix(f[0], path+"p")) {
			return f[1]
		}
	}
	return ""
}
