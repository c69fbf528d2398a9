//go:build !linux

package rawsock

import "net"

// Conn is Linux-only; elsewhere New returns nil and callers use the
// net.Conn's own Read and writev.
type Conn struct{}

// New returns nil: raw socket IO is Linux-only.
func New(net.Conn) *Conn { return nil }

// Read fails: there is no Conn on this system.
func (*Conn) Read([]byte) (int, error) { return 0, net.ErrClosed }

// Readv fails: there is no Conn on this system.
func (*Conn) Readv(_, _ []byte) (int, error) { return 0, net.ErrClosed }

// Writev fails: there is no Conn on this system.
func (*Conn) Writev([][]byte) error { return net.ErrClosed }

// PeerGone reports nothing: there is no Conn on this system.
func (*Conn) PeerGone() (shutWrite, dead bool) { return false, false }
