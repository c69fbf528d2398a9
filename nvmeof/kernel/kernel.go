// Package kernel opens NVMe namespaces that the operating system's own NVMe
// driver attached (for example after `nvme connect` over RDMA, FC or kernel
// TCP) as blockdev.Device values, and finds them by subsystem NQN + NSID or by
// namespace UUID through sysfs.
//
// Discovery reads the Linux sysfs layout:
//
//	<sysfs>/class/nvme/nvmeX/                   one directory per controller
//	    subsysnqn, transport, address, state     controller attributes
//	    nvmeXnY/ (no native multipath)           namespace block devices
//	<sysfs>/class/nvme-subsystem/nvme-subsysN/   one directory per subsystem
//	    subsysnqn
//	    nvmeXnY/ (native multipath head)         namespace block devices
//	<namespace dir>/nsid, uuid, nguid, wwid      namespace identifiers
//
// Hidden per-path nodes (nvmeXcYnZ) are skipped: IO goes through the head
// device, where the kernel does the multipathing. The sysfs root and the /dev
// root are parameters so tests can use a fake tree.
//
// Opening goes through blockdev.OpenFile with O_DIRECT, so any file or block
// device can also be opened with OpenPath.
//
// Concurrency: the functions here hold no state; a returned Device is safe for
// concurrent use as blockdev.Device requires.
package kernel

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nvstripe/nvstripe/blockdev"
)

// ErrNoNVMe is returned (wrapped, with class blockdev.ErrUnavailable) when the
// sysfs tree has no /sys/class/nvme: the kernel's nvme modules are not loaded.
var ErrNoNVMe = errors.New("no /sys/class/nvme: the nvme modules are not loaded; use the userspace initiator")

// ErrNotFound is returned (wrapped, with class blockdev.ErrUnavailable) when no
// attached namespace matches the request.
var ErrNotFound = errors.New("nvme namespace not found")

// Namespace describes one namespace block device the kernel attached.
type Namespace struct {
	// Name is the block device name, e.g. "nvme0n1".
	Name string
	// DevPath is the device node, e.g. "/dev/nvme0n1".
	DevPath string
	// SubsysNQN is the NQN of the subsystem the namespace belongs to.
	SubsysNQN string
	// NSID is the namespace ID inside the subsystem.
	NSID uint32
	// UUID, NGUID and WWID are the identifiers sysfs reports, as text
	// (empty when the kernel does not show them).
	UUID, NGUID, WWID string
}

// Options says where to look. The zero value is the real system.
type Options struct {
	// SysfsRoot is the sysfs mount point. Default "/sys".
	SysfsRoot string
	// DevRoot is the directory holding device nodes. Default "/dev".
	DevRoot string
	// FileOptions are passed to blockdev.OpenFile. Nil means the defaults
	// with Direct set to blockdev.DirectRequired for namespaces found in
	// sysfs (Open, OpenUUID) and blockdev.DirectAuto for OpenPath.
	FileOptions *blockdev.FileOptions
}

// EnsureDefaults fills unset fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.SysfsRoot == "" {
		o.SysfsRoot = "/sys"
	}
	if o.DevRoot == "" {
		o.DevRoot = "/dev"
	}
}

// List returns the namespaces attached in the sysfs tree of opts, sorted by
// name. It fails with ErrNoNVMe when the nvme class is missing, and on
// systems other than Linux.
func List(opts Options) ([]Namespace, error) {
	opts.EnsureDefaults()
	return list(opts)
}

// Find returns the namespace with the given subsystem NQN and NSID.
func Find(opts Options, nqn string, nsid uint32) (Namespace, error) {
	return findBy(opts, fmt.Sprintf("nqn %s nsid %d", nqn, nsid), func(ns Namespace) bool {
		return ns.SubsysNQN == nqn && ns.NSID == nsid
	})
}

// FindUUID returns the namespace whose UUID (or, failing that, NGUID) equals
// id, compared case-insensitively and ignoring dashes.
func FindUUID(opts Options, id string) (Namespace, error) {
	want := normID(id)
	if want == "" {
		return Namespace{}, blockdev.Mark(fmt.Errorf("kernel: empty namespace id"), blockdev.ErrInvalid)
	}
	return findBy(opts, "uuid "+id, func(ns Namespace) bool {
		return normID(ns.UUID) == want || normID(ns.NGUID) == want
	})
}

func findBy(opts Options, what string, match func(Namespace) bool) (Namespace, error) {
	all, err := List(opts)
	if err != nil {
		return Namespace{}, err
	}
	for _, ns := range all {
		if match(ns) {
			return ns, nil
		}
	}
	return Namespace{}, blockdev.Mark(fmt.Errorf("kernel: %s: %w", what, ErrNotFound), blockdev.ErrUnavailable)
}

func normID(s string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), "-", ""))
}

// Open finds the namespace nqn/nsid and opens its device node with O_DIRECT.
func Open(opts Options, nqn string, nsid uint32) (blockdev.Device, error) {
	ns, err := Find(opts, nqn, nsid)
	if err != nil {
		return nil, err
	}
	return openDevice(opts, ns.DevPath)
}

// OpenUUID finds the namespace by UUID/NGUID and opens it with O_DIRECT.
func OpenUUID(opts Options, id string) (blockdev.Device, error) {
	ns, err := FindUUID(opts, id)
	if err != nil {
		return nil, err
	}
	return openDevice(opts, ns.DevPath)
}

// openDevice opens a namespace's device node, with O_DIRECT required
// unless opts.FileOptions says otherwise.
func openDevice(opts Options, path string) (blockdev.Device, error) {
	if opts.FileOptions == nil {
		opts.FileOptions = &blockdev.FileOptions{Direct: blockdev.DirectRequired}
	}
	return OpenPath(opts, path)
}

// OpenPath opens any file or block device as a Device through
// blockdev.OpenFile (O_DIRECT where the file system allows it, unless
// opts.FileOptions says otherwise).
func OpenPath(opts Options, path string) (blockdev.Device, error) {
	f, err := blockdev.OpenFile(path, opts.FileOptions)
	if err != nil {
		return nil, fmt.Errorf("kernel: %w", err)
	}
	return f, nil
}
