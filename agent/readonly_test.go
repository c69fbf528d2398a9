package agent

import (
	"context"
	"errors"
	"testing"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/meta"
)

// TestReadOnlyMappingsShare: two agents map a volume read-only at once; a
// read-write map elsewhere is refused (classified busy, naming the holders).
func TestReadOnlyMappingsShare(t *testing.T) {
	e := newAgentEnv(t)
	ctx := context.Background()
	o1, o2 := e.options(t, ""), e.options(t, "")
	o1.Holder, o2.Holder = "reader-1", "reader-2"
	a1, a2 := e.newAgent(t, o1), e.newAgent(t, o2)
	for _, a := range []*Agent{a1, a2} {
		m, err := a.Map(ctx, Spec{Volume: "v", Via: ViaNBDListen, Where: "127.0.0.1:0", ReadOnly: true})
		if err != nil || !m.ReadOnly || m.State != api.StateServing {
			t.Fatalf("read-only map: %+v, %v", m, err)
		}
	}
	w := e.newAgent(t, e.options(t, ""))
	_, err := w.Map(ctx, Spec{Volume: "v", Via: ViaNBDListen, Where: "127.0.0.1:0"})
	if !errors.Is(err, meta.ErrBusy) || !errors.Is(classify(err), api.ErrBusy) {
		t.Fatalf("read-write map while read-only mapped elsewhere: %v", err)
	}
	if err := served(t, a1, "v").ReadAt(ctx, make([]byte, 4096), 0); err != nil {
		t.Errorf("read through a read-only mapping: %v", err)
	}
	if err := a1.Unmap(ctx, "v"); err != nil {
		t.Fatal(err)
	}
	if got := owners(t, e.store, "v"); len(got) != 1 || got[0] != "reader-2" {
		t.Errorf("owners after one reader unmapped: %v", got)
	}
}
