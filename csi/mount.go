package csi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	Root, Point, FSType, Source string
	Dev                         string // MAJOR:MINOR of the mounted filesystem
	ReadOnly                    bool   // mounted ro
	Device                      bool   // a device node bound onto a file
}

// mountAt returns the topmost mount on path, or nil.
func mountAt(path string) (*mountEntry, error) {
	ms, err := mounts()
	var found *mountEntry
	for i := range ms {
		if ms[i].Point == path {
			found = &ms[i]
		}
	}
	return found, err
}

// mounts returns the mounts of /proc/self/mountinfo, in mount order.
func mounts() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if m, ok := parseMountInfo(sc.Text()); ok {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// parseMountInfo parses one line of mountinfo (proc(5)); ok is false for a
// line too short to be one.
func parseMountInfo(line string) (m mountEntry, ok bool) {
	pre, post, ok := strings.Cut(line, " - ")
	a, b := strings.Fields(pre), strings.Fields(post)
	if !ok || len(a) < 6 || len(b) < 2 {
		return mountEntry{}, false
	}
	return mountEntry{Dev: a[2], Root: unescapeMount(a[3]), Point: unescapeMount(a[4]), FSType: b[0], Source: unescapeMount(b[1]),
		ReadOnly: slices.Contains(strings.Split(a[5], ","), "ro")}, true
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// isMounted says whether something is mounted on path.
func isMounted(path string) (bool, error) {
	m, err := mountAt(path)
	return m != nil, err
}

// bindMount bind-mounts src onto target, read-only when ro.
func bindMount(src, target string, ro bool) error {
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s on %s: %w", src, target, err)
	}
	if ro {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			unix.Unmount(target, 0)
			return fmt.Errorf("making %s read-only: %w", target, err)
		}
	}
	return nil
}

// mountFS mounts the filesystem fstype on dev at target.
func mountFS(dev, target, fstype string, ro bool, flags []string) error {
	var mf uintptr
	opts := slices.Clone(flags)
	if ro {
		mf |= unix.MS_RDONLY
		switch fstype {
		case "ext4":
			opts = append(opts, "noload") // replay no journal on a device others read
		case "xfs":
			opts = append(opts, "norecovery")
		}
	}
	if err := unix.Mount(dev, target, fstype, mf, strings.Join(opts, ",")); err != nil {
		return fmt.Errorf("mounting %s (%s) on %s: %w", dev, fstype, target, err)
	}
	return nil
}

// unmount unmounts every mount stacked on path (none is success).
func unmount(path string) error {
	for range 8 {
		m, err := mountAt(path)
		if err != nil || m == nil {
			return err
		}
		if err := unix.Unmount(path, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmounting %s: %w", path, err)
		}
	}
	return fmt.Errorf("unmounting %s: still mounted after 8 unmounts", path)
}

// run runs a tool, returning its stdout; a failure carries its stderr.
func run(ctx context.Context, name string, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// diskFormat is the filesystem (or partition table) blkid finds on dev, ""
// when the device is blank as far as blkid can tell.
func diskFormat(ctx context.Context, dev string) (string, error) {
	out, err := run(ctx, "blkid", "-p", "-o", "export", dev)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		return nonZero(dev) // blkid found nothing: blank only if it reads as zeros
	}
	if err != nil {
		return "", err
	}
	if out == "" {
		return nonZero(dev)
	}
	var typ, pttype string
	for line := range strings.Lines(out) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch k {
		case "TYPE":
			typ = v
		case "PTTYPE":
			pttype = v
		}
	}
	switch {
	case typ != "":
		return typ, nil
	case pttype != "":
		return "partition table " + pttype, nil
	}
	return "unknown data", nil // blkid found something it could not name: never format over it
}

// probeSpan is how much of each end of a device nonZero reads.
const probeSpan = 1 << 20

// nonZero is "" when the first and last MiB of dev read as zeros (a volume
// never written does), "unknown data" otherwise: data blkid cannot name is
// still data, and is never formatted over.
func nonZero(dev string) (string, error) {
	f, err := os.Open(dev)
	if err != nil {
		return "", err
	}
	defer f.Close()
	size, err := f.Seek(0, 2)
	if err != nil {
		return "", err
	}
	buf := make([]byte, min(probeSpan, size))
	for _, off := range []int64{0, size - int64(len(buf))} {
		if _, err := f.ReadAt(buf, off); err != nil {
			return "", fmt.Errorf("reading %s: %w", dev, err)
		}
		if slices.ContainsFunc(buf, func(b byte) bool { return b != 0 }) {
			return "unknown data", nil
		}
	}
	return "", nil
}

// makeFS makes a filesystem fstype on dev.
func makeFS(ctx context.Context, dev, fstype string) error {
	args := []string{dev}
	switch fstype {
	case "ext4":
		args = []string{"-F", "-q", "-m0", "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", dev}
	case "xfs":
		args = []string{"-q", "-K", dev}
	}
	_, err := run(ctx, "mkfs."+fstype, args...)
	return err
}

// growFS grows the filesystem fstype on dev, mounted at mnt, to the device.
func growFS(ctx context.Context, dev, mnt, fstype string) error {
	switch fstype {
	case "ext4", "ext3", "ext2":
		_, err := run(ctx, "resize2fs", dev)
		return err
	case "xfs":
		_, err := run(ctx, "xfs_growfs", mnt)
		return err
	}
	return fmt.Errorf("cannot grow a %s filesystem", fstype)
}

// deviceSize is the size of the block device dev in bytes.
func deviceSize(dev string) (int64, error) {
	f, err := os.Open(dev)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.Seek(0, 2)
}

// loopsOver returns the loop devices over the path file: live, the one
// backed by the file there now ("" when none), and stale, those backed by a
// file that was there before (a FUSE mount whose process ended: its loop
// devices fail every IO).
func loopsOver(file string) (live string, stale []string, err error) {
	paths, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return "", nil, err
	}
	var st unix.Stat_t
	statErr := unix.Stat(file, &st)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // detached meanwhile
		}
		// A file whose FUSE mount was detached shows as /NAME (the agent
		// names the file after the volume, in a directory of its own).
		backing := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
		if backing != file && backing != "/"+filepath.Base(file) {
			continue
		}
		dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(p)))
		info, err := loopStatus(dev)
		switch {
		case errors.Is(err, unix.ENXIO), errors.Is(err, os.ErrNotExist):
			continue // detached meanwhile
		case err != nil, backing != file:
			stale = append(stale, dev) // its file cannot be reached, or its mount was detached
		case statErr == nil && info.Device == st.Dev && info.Inode == st.Ino:
			live = dev
		default:
			stale = append(stale, dev)
		}
	}
	return live, stale, nil
}

// loopStatus reads a loop device's status: the device and inode of its
// backing file.
func loopStatus(dev string) (*unix.LoopInfo64, error) {
	f, err := os.Open(dev)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return unix.IoctlLoopGetStatus64(int(f.Fd()))
}

// attachLoop attaches a loop device over file (direct IO) and returns it.
func attachLoop(ctx context.Context, file string, ro bool) (string, error) {
	args := []string{"--find", "--show", "--direct-io=on"}
	if ro {
		args = append(args, "--read-only")
	}
	out, err := run(ctx, "losetup", append(args, file)...)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// detachLoops detaches every loop device over file.
func detachLoops(ctx context.Context, file string) error {
	live, stale, err := loopsOver(file)
	if err != nil {
		return err
	}
	if live != "" {
		stale = append(stale, live)
	}
	for _, dev := range stale {
		if _, err := run(ctx, "losetup", "-d", dev); err != nil {
			return err
		}
	}
	return nil
}

// mountsFrom returns the mounts of dev in mount order: its filesystem
// mounted (and bind-mounted) anywhere, and dev itself bound onto files.
func mountsFrom(dev string) ([]mountEntry, error) {
	ms, err := mounts()
	var out []mountEntry
	for _, m := range ms {
		devfs := (m.FSType == "devtmpfs" || m.FSType == "tmpfs") && m.Root == "/"+filepath.Base(dev)
		if m.Source == dev || devfs {
			m.Device = devfs
			out = append(out, m)
		}
	}
	return out, err
}

// refreshLoop makes a loop device take its backing file's new size.
func refreshLoop(ctx context.Context, dev string) error {
	_, err := run(ctx, "losetup", "--set-capacity", dev)
	return err
}
