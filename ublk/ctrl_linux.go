package ublk

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nvstripe/nvstripe/ublk/uring"
)

// control sends control commands to /dev/ublk-control over its own
// io_uring, one command at a time (mu), each waited for.
type control struct {
	mu   sync.Mutex
	f    *os.File
	ring *uring.Ring
	enc  Encoding
}

func openControl() (*control, error) {
	f, err := os.OpenFile(ControlPath, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO) {
		return nil, fmt.Errorf("%w: %w", ErrNoDriver, err)
	}
	if err != nil {
		return nil, fmt.Errorf("ublk control (ublk devices need CAP_SYS_ADMIN): %w", err)
	}
	ring, err := uring.New(4, &uring.Options{Flags: uring.SetupSQE128})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("ublk control ring: %w", err)
	}
	return &control{f: f, ring: ring}, nil
}

func (c *control) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ring.Close()
	c.f.Close()
}

// CmdError is a control or IO command the driver failed.
type CmdError struct {
	Cmd   string
	DevID uint32
	Errno syscall.Errno
}

func (e *CmdError) Error() string {
	return fmt.Sprintf("ublk %s (device %d): %v", e.Cmd, e.DevID, e.Errno)
}

func (e *CmdError) Unwrap() error { return e.Errno }

// do sends control command nr for device id with buf (if any) as the
// command's buffer and data0 as its inline data, in encoding enc.
func (c *control) do(enc Encoding, nr, id uint32, buf []byte, data0 uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var pin runtime.Pinner
	defer pin.Unpin()
	cmd := ctrlCmd{DevID: id, QueueID: 0xffff, Data0: data0}
	if len(buf) > 0 {
		pin.Pin(&buf[0])
		cmd.Addr, cmd.Len = uint64(uintptr(unsafe.Pointer(&buf[0]))), uint16(len(buf))
	}
	sqe, err := c.ring.SQE()
	if err != nil {
		return err
	}
	if err := c.ring.PrepCmd(sqe, int(c.f.Fd()), enc.ctrlOp(nr), cmd.encode(), uint64(nr)); err != nil {
		return err
	}
	cqe, err := c.ring.Wait()
	runtime.KeepAlive(buf)
	if err != nil {
		return fmt.Errorf("ublk %s: %w", cmdNames[nr], err)
	}
	if cqe.Res < 0 {
		return &CmdError{Cmd: cmdNames[nr], DevID: id, Errno: syscall.Errno(-cqe.Res)}
	}
	return nil
}

// addDev sends ADD_DEV, first ioctl-encoded and, when the driver does not
// know that encoding (6.0-6.3: ENODEV or EOPNOTSUPP), in the legacy one; the
// encoding that worked is kept for every later command.
func (c *control) addDev(want DevInfo) (DevInfo, error) {
	buf := make([]byte, devInfoSize)
	want.ID = 0xffffffff // any free ID
	want.Flags |= flagIoctlEncode
	want.encode(buf)
	err := c.do(EncodingIoctl, cmdAddDev, want.ID, buf, 0)
	if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.EOPNOTSUPP) {
		want.Flags &^= flagIoctlEncode
		want.encode(buf)
		c.enc = EncodingLegacy
		err = c.do(EncodingLegacy, cmdAddDev, want.ID, buf, 0)
	}
	if err != nil {
		return DevInfo{}, err
	}
	return decodeDevInfo(buf), nil
}

func (c *control) setParams(id uint32, p params) error {
	return c.do(c.enc, cmdSetParams, id, p.encode(), 0)
}

func (c *control) start(id uint32, pid int) error {
	return c.do(c.enc, cmdStartDev, id, nil, uint64(pid))
}
func (c *control) stop(id uint32) error { return c.do(c.enc, cmdStopDev, id, nil, 0) }
func (c *control) del(id uint32) error  { return c.do(c.enc, cmdDelDev, id, nil, 0) }

func (c *control) startRecovery(id uint32) error { return c.do(c.enc, cmdStartRecov, id, nil, 0) }
func (c *control) endRecovery(id uint32, pid int) error {
	return c.do(c.enc, cmdEndRecov, id, nil, uint64(pid))
}

// paramsSize returns the device size and logical block size set by
// SET_PARAMS (GET_PARAMS).
func (c *control) paramsSize(id uint32) (int64, int, error) {
	buf := make([]byte, paramsSize)
	le.PutUint32(buf, paramsSize)
	if err := c.do(c.enc, cmdGetParams, id, buf, 0); err != nil {
		return 0, 0, err
	}
	size, bs := decodeParamsSize(buf)
	return size, bs, nil
}

func (c *control) info(id uint32) (DevInfo, error) {
	buf := make([]byte, devInfoSize)
	if err := c.do(c.enc, cmdGetDevInfo, id, buf, 0); err != nil {
		return DevInfo{}, err
	}
	return decodeDevInfo(buf), nil
}

// detect finds the encoding the driver takes by asking GET_DEV_INFO of id
// both ways (for commands on a device this process did not add).
func (c *control) detect(id uint32) (DevInfo, error) {
	c.enc = EncodingIoctl
	d, err := c.info(id)
	if err == nil {
		return d, nil
	}
	c.enc = EncodingLegacy
	if d, err2 := c.info(id); err2 == nil {
		return d, nil
	}
	return DevInfo{}, err
}
