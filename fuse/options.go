package fuse

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nvstripe/nvstripe/blockdev"
)

// Options configure Mount. A nil *Options means all defaults.
type Options struct {
	// ReadOnly mounts read-only: files are 0444 and writes fail with EROFS.
	// Default false.
	ReadOnly bool
	// FsName is the source shown in /proc/mounts. Default "nvstripe".
	FsName string
	// AllowOther lets users other than the mounting one use the files.
	// Default false.
	AllowOther bool
	// Logf receives device errors. Default: discard.
	Logf func(format string, args ...any)
	// Debug logs every FUSE request (go-fuse's debug output). Default false.
	Debug bool
}

func (o *Options) ensureDefaults() {
	if o.FsName == "" {
		o.FsName = "nvstripe"
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// validate checks the file names and devices of a mount.
func validate(files map[string]blockdev.Device) error {
	if len(files) == 0 {
		return fmt.Errorf("fuse: no files to show: %w", blockdev.ErrInvalid)
	}
	for name, d := range files {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > 255 {
			return fmt.Errorf("fuse: file name %q is not a valid file name: %w", name, blockdev.ErrInvalid)
		}
		if d == nil {
			return fmt.Errorf("fuse: file %q has no device: %w", name, blockdev.ErrInvalid)
		}
	}
	return nil
}

// errUnsupported is returned by Mount where FUSE is not implemented.
var errUnsupported = errors.New("fuse: mounting is only implemented on Linux")
