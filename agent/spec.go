package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nbd"
	"github.com/nvstripe/nvstripe/ublk"
)

// Via says how a mapping serves its volume.
type Via string

// The ways to serve a volume.
const (
	// ViaNBDListen: an NBD server on a TCP ("HOST:PORT") or unix
	// ("unix:/path") listener; the export is named after the volume.
	ViaNBDListen Via = "nbd-listen"
	// ViaNBDDevice: the kernel's nbd driver, as /dev/nbdN.
	ViaNBDDevice Via = "nbd-device"
	// ViaUblk: the kernel's ublk driver, as /dev/ublkbN (Where is empty
	// until the driver has picked N).
	ViaUblk Via = "ublk"
	// ViaFUSE: the file DIR/VOLUME in a FUSE mount at DIR.
	ViaFUSE Via = "fuse"
)

// Spec is one mapping as asked for and as persisted: what the agent restores
// after a restart.
type Spec struct {
	Volume string `json:"volume"`
	Via    Via    `json:"via"`
	// Where is the listener address, /dev/nbdN, or the FUSE directory.
	Where    string `json:"where"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// SpecOf turns an API request into a Spec (validated).
func SpecOf(r *api.MapRequest) (Spec, error) {
	s := Spec{Volume: r.Volume, ReadOnly: r.ReadOnly}
	n := 0
	for _, w := range []struct {
		via   Via
		where string
	}{{ViaNBDListen, r.NbdListen}, {ViaNBDDevice, r.NbdDevice}, {ViaFUSE, r.FuseDir}} {
		if w.where != "" {
			s.Via, s.Where = w.via, w.where
			n++
		}
	}
	if r.Ublk {
		s.Via, s.Where = ViaUblk, ""
		n++
	}
	if n != 1 {
		return Spec{}, fmt.Errorf("map %s: give exactly one of an NBD listener, an NBD device, ublk or a FUSE directory: %w", r.Volume, api.ErrInvalid)
	}
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return s.canonical(), nil
}

// canonical spells a valid spec's device or directory one way
// (/dev/nbd01 is /dev/nbd1, /mnt//x/ is /mnt/x), so that the agent's
// check that no two mappings share one compares like with like.
func (s Spec) canonical() Spec {
	switch s.Via {
	case ViaNBDDevice:
		n, _ := strconv.Atoi(strings.TrimPrefix(s.Where, "/dev/nbd")) // valid: a number
		s.Where = "/dev/nbd" + strconv.Itoa(n)
	case ViaFUSE:
		s.Where = filepath.Clean(s.Where)
	}
	return s
}

// Validate checks the spec's form (nothing on the machine).
func (s Spec) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("map %s: %s: %w", s.Volume, fmt.Sprintf(format, args...), api.ErrInvalid)
	}
	if err := meta.CheckVolumeName(s.Volume); err != nil {
		return bad("%q is not a volume name (%s)", s.Volume, err.Error())
	}
	if !utf8.ValidString(s.Where) {
		return bad("%q is not UTF-8 (the agent's state keeps it as JSON)", s.Where)
	}
	switch s.Via {
	case ViaNBDListen:
		if p, ok := strings.CutPrefix(s.Where, "unix:"); ok {
			if !filepath.IsAbs(p) {
				return bad("NBD unix socket %q: an absolute path is needed", p)
			}
			return nil
		}
		if _, port, err := net.SplitHostPort(s.Where); err != nil || port == "" {
			return bad("NBD listener %q is not HOST:PORT or unix:/PATH", s.Where)
		}
	case ViaNBDDevice:
		n, err := strconv.Atoi(strings.TrimPrefix(s.Where, "/dev/nbd"))
		if !strings.HasPrefix(s.Where, "/dev/nbd") || err != nil || n < 0 {
			return bad("%q is not an nbd device (/dev/nbdN)", s.Where)
		}
	case ViaUblk:
		if s.Where != "" && !strings.HasPrefix(s.Where, "/dev/ublkb") {
			return bad("%q is not a ublk device (/dev/ublkbN)", s.Where)
		}
	case ViaFUSE:
		if !filepath.IsAbs(s.Where) {
			return bad("FUSE directory %q: an absolute path is needed", s.Where)
		}
	default:
		return bad("unknown way to serve %q", s.Via)
	}
	return nil
}

// CheckSpec validates s and checks, before anything is opened or leased,
// that this machine can serve it that way: for a kernel nbd device, that the
// nbd driver is there. Without it the error is nbd.ErrNoKernelNBD (which
// says to modprobe nbd or to use --nbd-listen or --fuse).
func CheckSpec(s Spec) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.Via == ViaNBDDevice && !kernelNBDPresent(s.Where) {
		return fmt.Errorf("map %s on %s: %w", s.Volume, s.Where, nbd.ErrNoKernelNBD)
	}
	if s.Via == ViaUblk {
		if err := ublk.Available(); err != nil {
			return fmt.Errorf("map %s as ublk: %w; serve over --nbd-listen, --nbd or --fuse instead", s.Volume, err)
		}
	}
	return nil
}

// kernelNBDPresent is a quick check for the nbd driver: the device node or
// the loaded module. (AttachKernel is the authority; this only avoids taking
// a lease for a mapping that cannot be served.)
func kernelNBDPresent(dev string) bool {
	for _, p := range []string{dev, "/sys/module/nbd"} {
		if _, err := os.Stat(p); err == nil || !errors.Is(err, os.ErrNotExist) {
			return true
		}
	}
	return false
}
