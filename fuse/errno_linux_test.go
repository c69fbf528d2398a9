package fuse

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
)

// TestErrno: device error classes map to the errnos the package doc lists.
func TestErrno(t *testing.T) {
	f := &fileNode{name: "v", opts: &Options{Logf: func(string, ...any) {}}}
	for _, c := range []struct {
		err  error
		op   string
		want syscall.Errno
	}{
		{blockdev.ErrFenced, "write", syscall.EPERM},
		{blockdev.ErrNoSpace, "write", syscall.ENOSPC},
		{blockdev.ErrOutOfRange, "write", syscall.ENOSPC},
		{blockdev.ErrOutOfRange, "read", syscall.EINVAL},
		{blockdev.ErrUnavailable, "read", syscall.EIO},
		{blockdev.ErrCorrupt, "read", syscall.EIO},
		{context.Canceled, "read", syscall.EINTR},
	} {
		if got := f.errno(fmt.Errorf("wrapped: %w", c.err), c.op, 0, 4096); got != c.want {
			t.Errorf("%v on %s: %v, want %v", c.err, c.op, got, c.want)
		}
	}
}
