//go:build !linux

package fuse

import "github.com/nvstripe/nvstripe/blockdev"

// FS is a mounted file system (Linux only).
type FS struct{}

// Mount fails: FUSE mounts are implemented for Linux only.
func Mount(dir string, files map[string]blockdev.Device, opts *Options) (*FS, error) {
	if err := validate(files); err != nil {
		return nil, err
	}
	return nil, errUnsupported
}

// Dir returns "".
func (m *FS) Dir() string { return "" }

// Unmount does nothing.
func (m *FS) Unmount() error { return nil }

// Resized does nothing.
func (m *FS) Resized(name string) error { return nil }
