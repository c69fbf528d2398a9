package agent

import (
	"path/filepath"
	"testing"

	"github.com/nvstripe/nvstripe/agent/api"
)

func TestCompleteRequest(t *testing.T) {
	r := &api.MapRequest{Volume: "v", FuseDir: "mnt"}
	if err := CompleteRequest(r); err != nil || !filepath.IsAbs(r.FuseDir) || r.NbdDevice != "" {
		t.Errorf("fuse: %+v, %v", r, err)
	}
	r = &api.MapRequest{Volume: "v", NbdListen: "127.0.0.1:0"}
	if err := CompleteRequest(r); err != nil || r.NbdDevice != "" {
		t.Errorf("nbd-listen: %+v, %v", r, err)
	}
}
