package admin

import (
	"context"
	"strings"
	"testing"
)

// TestStatusUnsettled: admin status counts the blocks a volume's record
// names unsettled, and its text names the command that settles them.
func TestStatusUnsettled(t *testing.T) {
	ctx := context.Background()
	s := fixture(t, 6)
	svc := NewService(s)
	vm, err := s.VolumeMap(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.SetUnsettled(ctx, 1, [][3]int64{{0, 0, 3}, {2, 1, 0}}, true); err != nil {
		t.Fatal(err)
	}
	st, err := svc.Status(ctx, &StatusRequest{})
	if err != nil || len(st.Volumes) != 1 || st.Volumes[0].Unsettled != 2 || !st.Volumes[0].UnsettledMore {
		t.Fatalf("status volumes %v (%v), want v with 2 unsettled blocks and more", st.GetVolumes(), err)
	}
	var b strings.Builder
	if err := WriteStatus(&b, st); err != nil || !strings.Contains(b.String(), "volume v: unsettled at least 3 blocks") ||
		!strings.Contains(b.String(), "nvstripe volume settle v") {
		t.Errorf("status text %q (%v), want the unsettled blocks and the settle command", b.String(), err)
	}
	if err := vm.SetUnsettled(ctx, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	if st, err = svc.Status(ctx, &StatusRequest{}); err != nil || st.Volumes[0].Unsettled != 0 || st.Volumes[0].UnsettledMore {
		t.Fatalf("status volumes after clearing %v (%v)", st.GetVolumes(), err)
	}
	b.Reset()
	if err := WriteStatus(&b, st); err != nil || strings.Contains(b.String(), "unsettled") {
		t.Errorf("status text after clearing %q (%v)", b.String(), err)
	}
}
