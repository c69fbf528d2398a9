package agent

import (
	"fmt"
	"path/filepath"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/nbd"
)

// CompleteRequest fills in what a map request from the command line leaves
// to this machine: a request that names no way to serve attaches a kernel
// nbd device (the one its volume had when its serving process died, else
// the first free one), and a FUSE directory becomes absolute.
func CompleteRequest(req *api.MapRequest) error {
	if req.FuseDir != "" {
		abs, err := filepath.Abs(req.FuseDir)
		if err != nil {
			return err
		}
		req.FuseDir = abs
	}
	if req.NbdListen != "" || req.NbdDevice != "" || req.Ublk || req.FuseDir != "" {
		return nil
	}
	d, err := nbd.PickDevice(req.Volume)
	if err != nil {
		return fmt.Errorf("map %s: %w", req.Volume, err)
	}
	req.NbdDevice = d.Path
	return nil
}
