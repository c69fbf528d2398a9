package agent

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/agent/api"
)

func TestCompleteRequest(t *testing.T) {
	r := &api.MapRequest{Volume: "v", FuseDir: "mnt"}
	if why, err := CompleteRequest(r); err != nil || !filepath.IsAbs(r.FuseDir) || r.NbdDevice != "" || r.Ublk || why != "" {
		t.Errorf("fuse: %+v, %q, %v", r, why, err)
	}
	r = &api.MapRequest{Volume: "v", NbdListen: "127.0.0.1:0"}
	if why, err := CompleteRequest(r); err != nil || r.NbdDevice != "" || r.Ublk || why != "" {
		t.Errorf("nbd-listen: %+v, %q, %v", r, why, err)
	}
}

// TestDefaultVia: a map that names no frontend takes ublk where its driver
// is loaded and the kernel nbd driver otherwise, and says which.
func TestDefaultVia(t *testing.T) {
	for _, c := range []struct {
		control bool
		via     Via
		say     string
	}{{true, ViaUblk, "ublk: /dev/ublk-control exists"}, {false, ViaNBDDevice, "nbd: no /dev/ublk-control"}} {
		via, why := DefaultVia(c.control)
		if via != c.via || !strings.HasPrefix(why, c.say) {
			t.Errorf("DefaultVia(%v) = %s, %q; want %s, %q...", c.control, via, why, c.via, c.say)
		}
	}
}
