//go:build linux

package nbd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Attachment is an export attached to a kernel nbd device.
type Attachment struct {
	// Path is the device node, /dev/nbdN.
	Path  string
	index int
	conns sync.WaitGroup
	stop  context.CancelFunc
}

// AttachKernel connects the export to the kernel's nbd driver as devPath
// ("/dev/nbdN", or "" for any free device) over opts.Connections socket
// pairs: the kernel gets one end of each, the server serves the other in
// transmission mode with simple replies (the kernel has no handshake and no
// structured replies). Dead connections are the kernel's business
// (opts.Timeout, opts.DeadConnTimeout); Detach ends the attachment. Needs
// CAP_SYS_ADMIN and the nbd module; without the module the error is
// ErrNoKernelNBD.
func (s *Server) AttachKernel(ctx context.Context, export, devPath string, opts AttachOptions) (*Attachment, error) {
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
	a := &Attachment{}
	kernelFDs, err := a.startConns(ctx, s, e, opts.Connections)
	if err != nil {
		return nil, err
	}
	defer closeFiles(kernelFDs)
	req := connectRequest{
		index: index, size: uint64(e.Device.Size()), blockSize: uint64(e.Device.BlockSize()),
		flags: uint64(e.flags(false)), timeout: opts.Timeout, deadConn: opts.DeadConnTimeout,
		backendID: opts.BackendID, clientFlag: clientFlagDisconnectOnClose,
	}
	for _, f := range kernelFDs {
		req.fds = append(req.fds, int(f.Fd()))
	}
	if a.index, err = connect(c, fam, req); err != nil {
		a.Close()
		return nil, err
	}
	a.Path = fmt.Sprintf("/dev/nbd%d", a.index)
	return a, nil
}

// startConns makes n socket pairs, serves one end of each and returns the
// others for the kernel.
func (a *Attachment) startConns(ctx context.Context, s *Server, e *export, n int) ([]*os.File, error) {
	ctx, a.stop = context.WithCancel(ctx)
	var kernel []*os.File
	for i := range n {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			closeFiles(kernel)
			a.Close()
			return nil, fmt.Errorf("nbd: socketpair: %w", err)
		}
		kernel = append(kernel, os.NewFile(uintptr(fds[0]), fmt.Sprintf("nbd-kernel-%d", i)))
		sf := os.NewFile(uintptr(fds[1]), fmt.Sprintf("nbd-server-%d", i))
		nc, err := net.FileConn(sf)
		sf.Close()
		if err != nil {
			closeFiles(kernel)
			a.Close()
			return nil, fmt.Errorf("nbd: socket pair conn: %w", err)
		}
		a.conns.Go(func() {
			if err := s.serveKernelConn(ctx, nc, e); err != nil {
				s.opts.Logf("nbd: kernel connection %d of %s: %v", i, e.name, err)
			}
		})
	}
	return kernel, nil
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
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

func connect(c *genetlink.Conn, fam genetlink.Family, req connectRequest) (int, error) {
	data, err := encodeConnect(req)
	if err != nil {
		return 0, fmt.Errorf("nbd: encode connect: %w", err)
	}
	msg := genetlink.Message{Header: genetlink.Header{Command: genlCmdConnect, Version: genlVersion}, Data: data}
	replies, err := c.Execute(msg, fam.ID, netlink.Request|netlink.Acknowledge)
	if err != nil {
		return 0, fmt.Errorf("nbd: NBD_CMD_CONNECT: %w", err)
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

// Close detaches the device (the kernel sends NBD_CMD_DISC on each socket)
// and waits for the server side of the sockets to end.
func (a *Attachment) Close() error {
	var err error
	if a.Path != "" {
		err = detach(a.index)
		a.Path = ""
	}
	if a.stop != nil {
		a.stop()
	}
	a.conns.Wait()
	return err
}

func detach(index int) error {
	c, fam, err := dialNBD()
	if err != nil {
		return err
	}
	defer c.Close()
	data, err := encodeDisconnect(index)
	if err != nil {
		return fmt.Errorf("nbd: encode disconnect: %w", err)
	}
	msg := genetlink.Message{Header: genetlink.Header{Command: genlCmdDisconnect, Version: genlVersion}, Data: data}
	if _, err := c.Execute(msg, fam.ID, netlink.Request|netlink.Acknowledge); err != nil {
		return fmt.Errorf("nbd: NBD_CMD_DISCONNECT /dev/nbd%d: %w", index, err)
	}
	return nil
}
