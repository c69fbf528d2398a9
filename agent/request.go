package agent

import (
	"fmt"
	"path/filepath"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/nbd"
	"github.com/nvstripe/nvstripe/ublk"
)

// CompleteRequest fills in what a map request from the command line leaves
// to this machine: a request that names no way to serve gets a kernel
// device, ublk where the ublk driver is loaded, else an nbd device (the one
// its volume had when its serving process died, else the first free one);
// a FUSE directory becomes absolute. It returns which kernel device it
// chose and why ("" when the request named its frontend).
func CompleteRequest(req *api.MapRequest) (string, error) {
	if req.FuseDir != "" {
		abs, err := filepath.Abs(req.FuseDir)
		if err != nil {
			return "", err
		}
		req.FuseDir = abs
	}
	if req.NbdListen != "" || req.NbdDevice != "" || req.Ublk || req.FuseDir != "" {
		return "", nil
	}
	via, why := DefaultVia(ublk.Available() == nil)
	if via == ViaUblk {
		req.Ublk = true
		return why, nil
	}
	d, err := nbd.PickDevice(req.Volume)
	if err != nil {
		return "", fmt.Errorf("map %s: %w", req.Volume, err)
	}
	req.NbdDevice = d.Path
	return why, nil
}

// DefaultVia is the kernel frontend of a map that names none, and why:
// ublk where the ublk driver's control node exists (ublkControl), else the
// kernel nbd driver.
func DefaultVia(ublkControl bool) (Via, string) {
	if ublkControl {
		return ViaUblk, "ublk: " + ublk.ControlPath + " exists; --nbd for nbd"
	}
	return ViaNBDDevice, "nbd: no " + ublk.ControlPath + ", the ublk driver is not loaded"
}
