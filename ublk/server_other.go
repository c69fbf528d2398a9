//go:build !linux

package ublk

import (
	"context"

	"github.com/nvstripe/nvstripe/blockdev"
)

// Server is only available on Linux.
type Server struct{}

// Start returns ErrNoDriver: ublk exists only on Linux.
func Start(ctx context.Context, dev blockdev.Device, opts *Options) (*Server, error) {
	return nil, ErrNoDriver
}

// Recover returns ErrNoDriver: ublk exists only on Linux.
func Recover(ctx context.Context, id int, dev blockdev.Device, opts *Options) (*Server, error) {
	return nil, ErrNoDriver
}

// Path, ID, Close and Wait exist so that callers build everywhere.
func (s *Server) Path() string { return "" }
func (s *Server) ID() int      { return -1 }
func (s *Server) Close() error { return nil }
func (s *Server) Wait() error  { return nil }

// Done is nil: there is no device to stop.
func (s *Server) Done() <-chan struct{} { return nil }

// Delete returns ErrNoDriver.
func Delete(id int) error { return ErrNoDriver }

// Available returns ErrNoDriver.
func Available() error { return ErrNoDriver }
