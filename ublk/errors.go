package ublk

import "errors"

// ErrNoDriver is the class of errors that say the ublk driver is missing
// (no /dev/ublk-control: the kernel lacks CONFIG_BLK_DEV_UBLK or ublk_drv is
// not loaded) or not usable on this system.
var ErrNoDriver = errors.New("ublk: driver not available (load ublk_drv; needs Linux 6.0+)")

// ControlPath is the ublk driver's control device.
const ControlPath = "/dev/ublk-control"
