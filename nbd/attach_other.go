//go:build !linux

package nbd

import (
	"context"
	"errors"
)

// errLinuxOnly joins ErrNoKernelNBD for every kernel call off Linux.
var errLinuxOnly = errors.Join(ErrNoKernelNBD, errors.New("nbd: kernel attach is only available on Linux"))

// Attachment is an export attached to a kernel nbd device (Linux only).
type Attachment struct {
	// Path is the device node, /dev/nbdN.
	Path string
}

// AttachKernel needs Linux's nbd driver; elsewhere it fails.
func (s *Server) AttachKernel(ctx context.Context, export, devPath string, opts AttachOptions) (*Attachment, error) {
	return nil, errLinuxOnly
}

// Close does nothing.
func (a *Attachment) Close() error { return nil }

// Done is closed: there is nothing to serve.
func (a *Attachment) Done() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// WaitSize needs Linux's nbd driver; elsewhere it fails.
func WaitSize(ctx context.Context, path string) (DeviceInfo, error) {
	return DeviceInfo{}, errLinuxOnly
}

// Detach needs Linux's nbd driver; elsewhere it fails.
func Detach(ctx context.Context, path string) error { return errLinuxOnly }

// CheckAttachable needs Linux's nbd driver; elsewhere it fails.
func CheckAttachable(path, backend string) error { return errLinuxOnly }

// PickDevice needs Linux's nbd driver; elsewhere it fails.
func PickDevice(backend string) (DeviceInfo, error) { return DeviceInfo{}, errLinuxOnly }

// Reconnects is 0.
func (a *Attachment) Reconnects() int64 { return 0 }

// Resize needs Linux's nbd driver; elsewhere it fails.
func (a *Attachment) Resize(size int64) error { return errLinuxOnly }
