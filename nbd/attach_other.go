//go:build !linux

package nbd

import (
	"context"
	"errors"
)

// Attachment is an export attached to a kernel nbd device (Linux only).
type Attachment struct {
	// Path is the device node, /dev/nbdN.
	Path string
}

// AttachKernel needs Linux's nbd driver; elsewhere it fails.
func (s *Server) AttachKernel(ctx context.Context, export, devPath string, opts AttachOptions) (*Attachment, error) {
	return nil, errors.Join(ErrNoKernelNBD, errors.New("nbd: kernel attach is only available on Linux"))
}

// Close does nothing.
func (a *Attachment) Close() error { return nil }
