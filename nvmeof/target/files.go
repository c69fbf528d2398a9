package target

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
)

// FileNamespace is a namespace served from the file DIR/Name.img (see
// OpenFileNamespaces).
type FileNamespace struct {
	// Name names the file and feeds the derived UUID. Required; no path
	// separators.
	Name string
	// Size is the namespace size in bytes: a missing file is created
	// sparse at it; an existing one must have it.
	Size int64
	// ANAGroup is the namespace's ANA group. Default 1.
	ANAGroup uint32
}

// OpenFileNamespaces opens, creating when missing, the file of each
// namespace in dir (created too), with blockSize-byte blocks for new files,
// and returns their configurations with NSIDs 1, 2, ... in order; each
// keeps its reservations in dir/NAME.resv (NamespaceConfig.ReservationFile),
// so that a fence survives a restart. The
// target does not close the devices: the caller closes them after the
// target (CloseNamespaces). On error, nothing stays open.
func OpenFileNamespaces(dir string, blockSize int, nss []FileNamespace) ([]NamespaceConfig, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []NamespaceConfig
	for i, ns := range nss {
		if ns.Name == "" || strings.ContainsAny(ns.Name, `/\`) {
			CloseNamespaces(out)
			return nil, fmt.Errorf("namespace name %q: want a file name: %w", ns.Name, blockdev.ErrInvalid)
		}
		d, err := blockdev.OpenFile(filepath.Join(dir, ns.Name+".img"),
			&blockdev.FileOptions{Size: ns.Size, BlockSize: blockSize, Sparse: true})
		if err != nil {
			CloseNamespaces(out)
			return nil, err
		}
		out = append(out, NamespaceConfig{NSID: uint32(i + 1), Name: ns.Name, Device: d, ANAGroup: ns.ANAGroup,
			ReservationFile: filepath.Join(dir, ns.Name+".resv")})
	}
	return out, nil
}

// CloseNamespaces closes the devices of nss.
func CloseNamespaces(nss []NamespaceConfig) error {
	var errs []error
	for _, ns := range nss {
		errs = append(errs, ns.Device.Close())
	}
	return errors.Join(errs...)
}

// ErrControlToken refuses to serve the control API without a token.
var ErrControlToken = errors.New("control API needs a token")

// ServeControl serves the control API (ControlHandler(token)) on addr
// (port 0: any). token must be set, on loopback too: every local user can
// reach a loopback port. It returns the bound address and the function
// that stops serving.
func (t *Target) ServeControl(addr, token string) (bound string, stop func(), err error) {
	if token == "" {
		return "", nil, fmt.Errorf("control %q: %w", addr, ErrControlToken)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("control: %w", err)
	}
	srv := &http.Server{Handler: t.ControlHandler(token), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return ln.Addr().String(), func() { srv.Close() }, nil
}
