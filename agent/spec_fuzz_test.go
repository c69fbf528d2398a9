package agent

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/agent/api"
)

// FuzzSpecOf feeds map requests, as any local user may send them to the
// agent's socket, to SpecOf. Nothing may panic; a refused request is
// api.ErrInvalid; an accepted one names exactly one way to serve, in one
// spelling per device or directory (so that the agent's check that no two
// mappings share one compares like with like), a volume name that stays
// inside its FUSE directory, and survives the agent's state (JSON) as it
// is. The seed corpus is in testdata/fuzz.
func FuzzSpecOf(f *testing.F) {
	f.Add("vol", "127.0.0.1:10809", "", "", false, false)
	f.Add("vol", "", "/dev/nbd3", "", false, true)
	f.Add("vol", "", "", "/mnt/nvs", false, false)
	f.Add("vol", "", "", "", true, false)
	f.Add("vol", "unix:/run/nvs.sock", "/dev/nbd0", "", false, false)
	f.Fuzz(func(t *testing.T, volume, listen, device, fuse string, ublk, readOnly bool) {
		req := &api.MapRequest{Volume: volume, NbdListen: listen, NbdDevice: device, FuseDir: fuse, Ublk: ublk, ReadOnly: readOnly}
		s, err := SpecOf(req)
		if err != nil {
			if !errors.Is(err, api.ErrInvalid) {
				t.Fatalf("request %+v refused with %v, not class ErrInvalid", req, err)
			}
			return
		}
		ways := 0
		for _, w := range []bool{listen != "", device != "", fuse != "", ublk} {
			if w {
				ways++
			}
		}
		if ways != 1 || s.Volume != volume || s.ReadOnly != readOnly {
			t.Fatalf("request %+v (%d ways) accepted as %+v", req, ways, s)
		}
		checkCanonical(t, s)
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back Spec
		if err := json.Unmarshal(b, &back); err != nil || back != s || back.Validate() != nil {
			t.Fatalf("spec %+v comes back from the state as %+v (%v, valid: %v)", s, back, err, back.Validate())
		}
	})
}

// checkCanonical checks that an accepted spec names its device or
// directory one way only and that its volume's FUSE file stays inside.
func checkCanonical(t *testing.T, s Spec) {
	switch s.Via {
	case ViaNBDDevice:
		n, err := strconv.Atoi(strings.TrimPrefix(s.Where, "/dev/nbd"))
		if err != nil || s.Where != "/dev/nbd"+strconv.Itoa(n) {
			t.Fatalf("nbd device %q is not spelt /dev/nbdN", s.Where)
		}
	case ViaFUSE:
		if s.Where != filepath.Clean(s.Where) {
			t.Fatalf("FUSE directory %q is not clean (%q)", s.Where, filepath.Clean(s.Where))
		}
		if file := filepath.Join(s.Where, s.Volume); filepath.Dir(file) != s.Where {
			t.Fatalf("volume %q in FUSE directory %q is the file %q, outside it", s.Volume, s.Where, file)
		}
	}
}
