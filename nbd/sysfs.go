package nbd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrDeviceBusy is returned when a kernel nbd device is already connected
// to a server (/sys/block/nbdN/pid exists and names a live process, or the
// kernel said EBUSY).
var ErrDeviceBusy = errors.New("nbd device is in use")

// ErrNoDevice is returned when no kernel nbd device matches: none is free,
// or none serves the named backend.
var ErrNoDevice = errors.New("no such nbd device")

// sysBlock is where the kernel lists block devices.
const sysBlock = "/sys/block"

// DeviceInfo is what sysfs says about one kernel nbd device.
type DeviceInfo struct {
	// Path is the device node, /dev/nbdN.
	Path  string
	Index int
	// Size is the device's size in bytes (0 while not connected).
	Size int64
	// PID is the process that connected the device (the pid attribute,
	// present only while the device is connected); 0 when there is none.
	PID int
	// Backend is the backend identifier given at connect (the backend
	// attribute; nvstripe gives the volume name); "" when there is none.
	Backend string
}

// Connected says whether the kernel holds a connection for the device.
func (d DeviceInfo) Connected() bool { return d.PID != 0 }

// readDevices lists the nbd devices under root (a /sys/block tree), by
// index.
func readDevices(root string) ([]DeviceInfo, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("nbd: list %s: %w", root, err)
	}
	var out []DeviceInfo
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), "nbd")
		idx, err := strconv.Atoi(n)
		if !ok || err != nil || idx < 0 {
			continue
		}
		d, err := readDevice(root, idx)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b DeviceInfo) int { return a.Index - b.Index })
	return out, nil
}

// readDevice reads /sys/block/nbdN under root. A missing pid or backend
// attribute means none; a missing size, that the device does not exist.
func readDevice(root string, index int) (DeviceInfo, error) {
	dir := filepath.Join(root, fmt.Sprintf("nbd%d", index))
	d := DeviceInfo{Path: fmt.Sprintf("/dev/nbd%d", index), Index: index}
	sectors, err := readInt(filepath.Join(dir, "size"))
	if errors.Is(err, fs.ErrNotExist) {
		return d, fmt.Errorf("nbd: %s: %w", d.Path, ErrNoDevice)
	}
	if err != nil {
		return d, err
	}
	d.Size = sectors * 512 // sysfs size is always in 512-byte sectors
	pid, err := readInt(filepath.Join(dir, "pid"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return d, err
	}
	d.PID = int(pid)
	b, err := os.ReadFile(filepath.Join(dir, "backend"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return d, fmt.Errorf("nbd: %w", err)
	}
	d.Backend = strings.TrimSpace(string(b))
	return d, nil
}

// readInt reads a file holding one decimal number.
func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("nbd: %w", err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("nbd: %s holds %q, not a count", path, strings.TrimSpace(string(b)))
	}
	return v, nil
}

// freeDevice returns the lowest-numbered device under root that is not
// connected and has size 0, skipping those in skip.
func freeDevice(root string, skip map[int]bool) (DeviceInfo, error) {
	ds, err := readDevices(root)
	if err != nil {
		return DeviceInfo{}, err
	}
	for _, d := range ds {
		if !d.Connected() && d.Size == 0 && !skip[d.Index] {
			return d, nil
		}
	}
	return DeviceInfo{}, fmt.Errorf("nbd: every one of the %d nbd devices is in use (modprobe nbd nbds_max=N for more): %w", len(ds), ErrNoDevice)
}

// deviceOf returns the connected device under root whose backend is name.
func deviceOf(root, name string) (DeviceInfo, error) {
	ds, err := readDevices(root)
	if err != nil {
		return DeviceInfo{}, err
	}
	for _, d := range ds {
		if d.Connected() && d.Backend == name {
			return d, nil
		}
	}
	return DeviceInfo{}, fmt.Errorf("nbd: no connected nbd device serves %q: %w", name, ErrNoDevice)
}

// FreeDevice returns the first kernel nbd device that is not connected and
// has size 0: what `nvstripe map VOL` attaches by default. Without the nbd
// module the error is ErrNoKernelNBD; when every device is in use it wraps
// ErrNoDevice.
func FreeDevice() (DeviceInfo, error) {
	if _, err := os.Stat("/sys/module/nbd"); errors.Is(err, fs.ErrNotExist) {
		return DeviceInfo{}, ErrNoKernelNBD
	}
	return freeDevice(sysBlock, nil)
}

// Devices lists the kernel's nbd devices (none when the module is not
// loaded).
func Devices() ([]DeviceInfo, error) {
	ds, err := readDevices(sysBlock)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return ds, err
}

// DeviceOf returns the connected kernel nbd device whose backend identifier
// is name (AttachOptions.BackendID: nvstripe gives the volume name); the
// error wraps ErrNoDevice when there is none.
func DeviceOf(name string) (DeviceInfo, error) { return deviceOf(sysBlock, name) }

// Device returns what sysfs says about path (/dev/nbdN).
func Device(path string) (DeviceInfo, error) {
	index, err := parseDevPath(path)
	if err != nil {
		return DeviceInfo{}, err
	}
	if index < 0 {
		return DeviceInfo{}, fmt.Errorf("nbd: no device path given: %w", ErrNoDevice)
	}
	return readDevice(sysBlock, index)
}
