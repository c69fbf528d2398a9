//go:build !linux

package blockdev

import (
	"io"
	"os"
)

// Portable fallbacks: no O_DIRECT, no fallocate (zeroing writes zeros), no
// allocation map (the whole range is reported), Flush is fsync, and errors
// other than a closed file are ErrUnavailable.

func directFlag() (int, bool) { return 0, false }

func fileFallocate(*os.File, fallocOp, int64, int64) error { return errUnsupported }

func fileSync(f *os.File) error { return f.Sync() }

func blockDevSize(f *os.File) (int64, error) { return f.Seek(0, io.SeekEnd) }

func blockDevZero(*os.File, int64, int64, bool) error { return errUnsupported }

func fileDataExtents(*os.File, int64, int64, int64) ([]Extent, error) {
	return nil, errUnsupported
}

func classifyErrno(error, bool) error { return nil }

func mapTmpfs(*os.File, int64) ([]byte, error) { return nil, errUnsupported }

func unmap([]byte) {}

func resident([]byte, int64, int64) bool { return false }

func pwriteDsync(*os.File, []byte, int64) error { return errUnsupported }
