//go:build !linux

package nbd

import "net"

// rawSock is Linux-only (see rawsock_linux.go); elsewhere connections use
// the net.Conn's own Read and writev.
type rawSock struct{}

func newRawSock(net.Conn) *rawSock { return nil }

func (*rawSock) Read([]byte) (int, error) { return 0, net.ErrClosed }

func (*rawSock) writev([][]byte) error { return net.ErrClosed }

func (*rawSock) peerGone() (shutWrite, dead bool) { return false, false }
