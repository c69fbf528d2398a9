package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/internal/testutil"
)

// TestForegroundUnmapRefusedWhileOpen: a foreground map registered in its
// directory is found by Unmap; while its FUSE file is open the unmap is
// refused (ErrBusy) and the map goes on serving, listed; once closed, an
// unmap by the file's path unmaps it, ServeForeground returns nil and the
// record is gone.
func TestForegroundUnmapRefusedWhileOpen(t *testing.T) {
	testutil.NeedFUSE(t)
	e := newAgentEnv(t)
	ctx := context.Background()
	dir, mnt := t.TempDir(), filepath.Join(t.TempDir(), "mnt")
	noAgent := filepath.Join(dir, "agent.sock")
	url, done := startServing(t, func(ready func(string)) error {
		return ServeForeground(ctx, Spec{Volume: "v", Via: ViaFUSE, Where: mnt}, ForegroundOptions{Agent: e.options(t, ""), ListDir: dir,
			Serving: ready})
	})
	f, err := os.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Unmap(ctx, "v", noAgent, dir, false)
	if !errors.Is(err, api.ErrBusy) {
		t.Errorf("unmap while the file is open: %v, want ErrBusy", err)
	}
	rows := ListMappings(ctx, noAgent, dir, false, func(w string) { t.Errorf("ls warned: %s", w) })
	if len(rows) != 1 || rows[0].Device != url || rows[0].Server != "map" || rows[0].State != api.StateServing {
		t.Errorf("ls after a refused unmap: %+v", rows)
	}
	f.Close()
	u, err := Unmap(ctx, url, noAgent, dir, false)
	if err != nil || u != (Unmapped{Volume: "v", Device: url, Server: "map"}) {
		t.Errorf("unmap by path: %+v, %v", u, err)
	}
	if err := <-done; err != nil {
		t.Errorf("ServeForeground after unmap: %v", err)
	}
	if _, err := os.Stat(MapSocket(dir, "v")); !os.IsNotExist(err) {
		t.Errorf("record left: %v", err)
	}
	if _, err := Unmap(ctx, "v", noAgent, dir, false); !errors.Is(err, ErrNotMapped) {
		t.Errorf("unmap again: %v, want ErrNotMapped", err)
	}
}
