package ublk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nvstripe/nvstripe/blockdev"
)

// Server is one device served over ublk: /dev/ublkbN backed by a
// blockdev.Device.
type Server struct {
	ctrl   *control
	info   DevInfo
	cfd    int
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Start adds a ublk device for dev, serves it, and returns once /dev/ublkbN
// is live. The device is stopped and deleted when ctx is cancelled or Close
// is called; Wait returns after that.
func Start(ctx context.Context, dev blockdev.Device, opts *Options) (*Server, error) {
	o := opts.withDefaults(runtime.NumCPU())
	if err := o.validate(); err != nil {
		return nil, err
	}
	if _, err := paramsFor(dev, uint32(o.MaxIO), o.ReadOnly); err != nil {
		return nil, err
	}
	ctrl, err := openControl()
	if err != nil {
		return nil, err
	}
	s := &Server{ctrl: ctrl, cfd: -1, done: make(chan struct{})}
	queues, err := s.add(dev, o)
	if err != nil {
		s.release()
		return nil, err
	}
	s.launch(ctx, queues)
	return s, nil
}

func (s *Server) launch(ctx context.Context, queues []chan error) {
	ctx, s.cancel = context.WithCancel(ctx)
	go s.run(ctx, queues)
}

// Recover takes back device id, added with Options.Recovery by a server
// that died, and serves it from dev, which must have the size and block
// size the device was added with. It waits up to recoverWait for the driver
// to notice the death (it checks every 5 s) and quiesce the device. Queue
// count, depth and IO size are the device's; of opts only ReadOnly counts.
func Recover(ctx context.Context, id int, dev blockdev.Device, opts *Options) (*Server, error) {
	ctrl, err := openControl()
	if err != nil {
		return nil, err
	}
	s := &Server{ctrl: ctrl, cfd: -1, done: make(chan struct{})}
	queues, err := s.recover(uint32(id), dev, opts != nil && opts.ReadOnly)
	if err != nil {
		s.release()
		return nil, err
	}
	s.launch(ctx, queues)
	return s, nil
}

// recoverWait bounds how long Recover waits for a dead server's device to
// be quiesced.
const recoverWait = 30 * time.Second

func (s *Server) recover(id uint32, dev blockdev.Device, readOnly bool) ([]chan error, error) {
	info, err := s.ctrl.detect(id)
	if err != nil {
		return nil, err
	}
	if info.Flags&flagRecovery == 0 {
		return nil, fmt.Errorf("%w: ublk device %d was not added with recovery", ErrBadOptions, id)
	}
	size, bs, err := s.ctrl.paramsSize(id)
	if err != nil {
		return nil, err
	}
	if size != dev.Size() || bs != dev.BlockSize() {
		return nil, fmt.Errorf("%w: ublk device %d has %d bytes in blocks of %d, the device to serve it %d in blocks of %d",
			ErrBadOptions, id, size, bs, dev.Size(), dev.BlockSize())
	}
	s.info = info
	for deadline := time.Now().Add(recoverWait); ; time.Sleep(100 * time.Millisecond) {
		err = s.ctrl.startRecovery(id)
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w (the old server may still run)", err)
	}
	if s.cfd, err = openCharDev(id); err != nil {
		return nil, err
	}
	queues, err := s.startQueues(dev, readOnly, func() error { return s.ctrl.endRecovery(id, os.Getpid()) })
	if err == nil {
		err = s.checkLive(queues)
	}
	if err != nil {
		s.closeCharDev()
		return nil, err
	}
	return queues, nil
}

// add runs ADD_DEV, SET_PARAMS, starts the queues and START_DEV. On error
// the device is deleted again.
func (s *Server) add(dev blockdev.Device, o Options) ([]chan error, error) {
	want := DevInfo{Queues: uint16(o.Queues), Depth: uint16(o.Depth), MaxIOBytes: uint32(o.MaxIO)}
	if o.Recovery {
		want.Flags |= flagRecovery | flagReissue
	}
	info, err := s.ctrl.addDev(want)
	if err != nil {
		return nil, err
	}
	s.info = info
	p, err := paramsFor(dev, info.MaxIOBytes, o.ReadOnly)
	if err == nil {
		err = s.ctrl.setParams(info.ID, p)
	}
	if err == nil {
		s.cfd, err = openCharDev(info.ID)
	}
	var queues []chan error
	if err == nil {
		queues, err = s.startQueues(dev, o.ReadOnly, func() error { return s.ctrl.start(info.ID, os.Getpid()) })
	}
	if err == nil {
		err = s.checkLive(queues)
	}
	if err != nil {
		s.closeCharDev()
		return nil, errors.Join(err, s.ctrl.del(info.ID))
	}
	return queues, nil
}

// checkLive reads the device's info back and stops the queues unless it is
// live.
func (s *Server) checkLive(queues []chan error) error {
	info, err := s.ctrl.info(s.info.ID)
	if err == nil && info.State != StateLive {
		err = fmt.Errorf("ublk device %d in state %d after starting, want live (%d)", s.info.ID, info.State, StateLive)
	}
	if err != nil {
		s.ctrl.stop(s.info.ID)
		s.waitQueues(queues)
		return err
	}
	s.info = info
	return nil
}

// openCharDev opens /dev/ublkcN, waiting up to 5 s for devtmpfs or udev to
// create it.
func openCharDev(id uint32) (int, error) {
	path := fmt.Sprintf("/dev/ublkc%d", id)
	for i := 0; ; i++ {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err == nil || !errors.Is(err, unix.ENOENT) || i == 500 {
			if err != nil {
				return -1, fmt.Errorf("open %s: %w", path, err)
			}
			return fd, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startQueues starts one goroutine per queue, waits for each to have
// fetched all its tags, then calls live: START_DEV or END_USER_RECOVERY,
// which the driver holds until then. Each returned channel yields its
// queue's exit error.
func (s *Server) startQueues(dev blockdev.Device, readOnly bool, live func() error) ([]chan error, error) {
	ioCtx := context.Background() // IO outlives cancellation: STOP_DEV waits for it
	inline := blockdev.IsSynchronous(dev)
	var queues []chan error
	var setupErr error
	for id := range s.info.Queues {
		q := &queue{id: id, depth: int(s.info.Depth), maxIO: int(s.info.MaxIOBytes), enc: s.ctrl.enc,
			cfd: s.cfd, dev: dev, readOnly: readOnly, inline: inline}
		ready, exit := make(chan error, 1), make(chan error, 1)
		go func() { exit <- q.run(ioCtx, ready) }()
		if err := <-ready; err != nil {
			setupErr = err
			break
		}
		queues = append(queues, exit)
	}
	if setupErr == nil {
		setupErr = live()
	}
	if setupErr != nil {
		s.ctrl.stop(s.info.ID) // aborts the fetched tags of the queues that started
		s.waitQueues(queues)
		return nil, setupErr
	}
	return queues, nil
}

func (s *Server) waitQueues(queues []chan error) error {
	var errs []error
	for _, q := range queues {
		errs = append(errs, <-q)
	}
	return errors.Join(errs...)
}

// run waits for ctx or for the queues to end by themselves (the driver
// stopped the device), then stops and deletes the device.
func (s *Server) run(ctx context.Context, queues []chan error) {
	gone := make(chan error, 1)
	go func() { gone <- s.waitQueues(queues) }()
	var qerr error
	select {
	case <-ctx.Done():
		qerr = s.ctrl.stop(s.info.ID)
		qerr = errors.Join(qerr, <-gone)
	case qerr = <-gone:
		s.ctrl.stop(s.info.ID)
	}
	s.closeCharDev() // DEL_DEV waits until the char device is released
	s.err = errors.Join(qerr, s.ctrl.del(s.info.ID))
	s.ctrl.close()
	close(s.done)
}

func (s *Server) closeCharDev() {
	if s.cfd >= 0 {
		unix.Close(s.cfd)
		s.cfd = -1
	}
}

func (s *Server) release() {
	s.closeCharDev()
	s.ctrl.close()
}

// ID is the device number N of /dev/ublkbN.
func (s *Server) ID() int { return int(s.info.ID) }

// Path is the block device, /dev/ublkbN.
func (s *Server) Path() string { return fmt.Sprintf("/dev/ublkb%d", s.info.ID) }

// Info is what the driver reported after START_DEV.
func (s *Server) Info() DevInfo { return s.info }

// Encoding is the command encoding the driver accepted.
func (s *Server) Encoding() Encoding { return s.ctrl.enc }

// Close stops and deletes the device (requests in progress finish first)
// and returns Wait's error.
func (s *Server) Close() error {
	s.cancel()
	return s.Wait()
}

// Wait returns once the device is stopped and deleted, with the first error
// of the queues or of STOP_DEV/DEL_DEV.
func (s *Server) Wait() error {
	<-s.done
	return s.err
}

// Done is closed once the device is stopped and deleted: after Close, or
// when the driver stopped it (someone else sent STOP_DEV).
func (s *Server) Done() <-chan struct{} { return s.done }

// Delete stops and deletes device id left behind by a server that died
// (kill -9): the 6.1 driver removes /dev/ublkbN by itself then, but keeps
// /dev/ublkcN and the ID until DEL_DEV (and a device added with Recovery
// stays quiesced). It refuses a device whose server process is alive.
func Delete(id int) error {
	c, err := openControl()
	if err != nil {
		return err
	}
	defer c.close()
	info, err := c.detect(uint32(id))
	if err != nil {
		return err
	}
	if info.State != StateDead && info.ServerPID > 0 && unix.Kill(int(info.ServerPID), 0) == nil {
		return fmt.Errorf("ublk device %d is served by process %d, which is alive: stop that instead", id, info.ServerPID)
	}
	return errors.Join(c.stop(uint32(id)), c.del(uint32(id)))
}

// Available returns nil when the ublk driver is loaded, else an error of
// class ErrNoDriver saying so.
func Available() error {
	if _, err := os.Stat(ControlPath); err != nil {
		return fmt.Errorf("%w: %w", ErrNoDriver, err)
	}
	return nil
}
