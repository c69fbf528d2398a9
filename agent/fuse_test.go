package agent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/internal/testutil"
)

// TestMapFUSE maps a volume as a FUSE file, does IO through it, refuses to
// unmap while the file is open, and unmaps once it is closed.
func TestMapFUSE(t *testing.T) {
	testutil.NeedFUSE(t)
	e := newAgentEnv(t)
	ctx := context.Background()
	a := e.newAgent(t, e.options(t, ""))
	dir := filepath.Join(t.TempDir(), "mnt")
	m, err := a.Map(ctx, Spec{Volume: "v", Via: ViaFUSE, Where: dir})
	if err != nil {
		t.Fatal(err)
	}
	if m.Url != filepath.Join(dir, "v") {
		t.Errorf("URL %q", m.Url)
	}
	if _, err := a.Map(ctx, Spec{Volume: "w", Via: ViaFUSE, Where: dir}); !errors.Is(err, api.ErrBusy) {
		t.Errorf("second volume on the same FUSE directory: %v, want ErrBusy", err)
	}
	f, err := os.OpenFile(m.Url, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != envVolSize {
		t.Fatalf("stat: %v, %v", fi, err)
	}
	data := randBytes(t, 1<<20)
	if _, err := f.WriteAt(data, 5<<20); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 5<<20); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v, equal %v", err, bytes.Equal(got, data))
	}
	if err := a.Unmap(ctx, "v"); !errors.Is(err, api.ErrBusy) {
		t.Errorf("unmap with the file open: %v, want ErrBusy", err)
	}
	if l := a.List(); len(l) != 1 || l[0].State != api.StateServing {
		t.Fatalf("after a refused unmap: %+v", l)
	}
	f.Close()
	if err := a.Unmap(ctx, "v"); err != nil {
		t.Fatal(err)
	}
	if testutil.Mounted(t, dir) {
		t.Error("still mounted after unmap")
	}
}
