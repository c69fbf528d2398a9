//go:build linux

package fuse

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"github.com/nvstripe/nvstripe/blockdev"
)

// Mount settings measured on our machines (toolchain.md): async direct IO
// (12 requests in flight instead of 1), 1 MiB requests without splice.
const (
	maxWrite    = 1 << 20
	attrTimeout = time.Minute
)

// FS is a mounted file system showing devices as files.
type FS struct {
	dir    string
	server *gofuse.Server
}

// Mount shows each device of files as dir/NAME and serves the mount in the
// background until Unmount. The devices must stay open until then; Unmount
// does not close them.
func Mount(dir string, files map[string]blockdev.Device, opts *Options) (*FS, error) {
	if err := validate(files); err != nil {
		return nil, err
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.ensureDefaults()
	root := &rootNode{files: files, opts: o}
	timeout := attrTimeout
	fsOpts := &fs.Options{
		MountOptions: gofuse.MountOptions{
			FsName:            o.FsName,
			Name:              "nvstripe",
			AllowOther:        o.AllowOther,
			MaxWrite:          maxWrite,
			DisableSplice:     true,
			DirectMount:       true,
			DisableXAttrs:     true,
			ExtraCapabilities: gofuse.CAP_ASYNC_DIO,
			Debug:             o.Debug,
		},
		EntryTimeout: &timeout,
		AttrTimeout:  &timeout,
	}
	server, err := fs.Mount(dir, root, fsOpts)
	if err != nil {
		return nil, fmt.Errorf("fuse: mount %s: %w", dir, err)
	}
	return &FS{dir: dir, server: server}, nil
}

// Dir returns the mount point.
func (m *FS) Dir() string { return m.dir }

// Unmount unmounts the file system and waits until it is no longer served.
// It fails (and stays mounted) while a file is in use, e.g. by a loop
// device. It is idempotent.
func (m *FS) Unmount() error {
	if err := m.server.Unmount(); err != nil {
		return fmt.Errorf("fuse: unmount %s: %w", m.dir, err)
	}
	m.server.Wait()
	return nil
}

// rootNode is the mount's directory: one file per device.
type rootNode struct {
	fs.Inode
	files map[string]blockdev.Device
	opts  Options
}

var _ = (fs.NodeOnAdder)((*rootNode)(nil))
var _ = (fs.NodeStatfser)((*rootNode)(nil))

// OnAdd creates the files, in name order (stable inode numbers).
func (r *rootNode) OnAdd(ctx context.Context) {
	names := make([]string, 0, len(r.files))
	for name := range r.files {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, name := range names {
		f := &fileNode{dev: r.files[name], bio: blockdev.NewByteIO(r.files[name]), name: name, opts: &r.opts}
		ch := r.NewPersistentInode(ctx, f, fs.StableAttr{Mode: syscall.S_IFREG, Ino: uint64(i + 2)})
		r.AddChild(name, ch, false)
	}
}

// Statfs reports the devices' total size, all of it used.
func (r *rootNode) Statfs(ctx context.Context, out *gofuse.StatfsOut) syscall.Errno {
	var total int64
	for _, d := range r.files {
		total += d.Size()
	}
	out.Bsize, out.Frsize = 4096, 4096
	out.Blocks = uint64(total / 4096)
	out.Files = uint64(len(r.files))
	out.NameLen = 255
	return 0
}
