package capacity

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/meta"
)

// TestCreateAndResizeVolume: 3 namespaces of 10 shard slots of 1 MiB
// (30 MiB usable for 2+1): a volume within is created quietly, one past the
// usable space with a warning, one past the limit of 2 is refused and not
// recorded, a taken name is ErrExists whatever its size; growing past the limit is refused and leaves the size.
func TestCreateAndResizeVolume(t *testing.T) {
	ctx := context.Background()
	s := memStore(t, "cap")
	smallCluster(t, s)
	if rec, warn, err := CreateVolume(ctx, s, spec21("a", 20<<20)); err != nil || warn != "" || rec.Name != "a" {
		t.Fatalf("a within the usable space: %v %q %v", rec, warn, err)
	}
	if _, warn, err := CreateVolume(ctx, s, spec21("b", 10<<20)); err != nil || !strings.Contains(warn, "1.50 times") {
		t.Fatalf("b past the usable space: warning %q, %v", warn, err)
	}
	if _, _, err := CreateVolume(ctx, s, spec21("c", 12<<20)); !errors.Is(err, ErrOvercommitted) {
		t.Fatalf("c past the limit: %v, want ErrOvercommitted", err)
	}
	if _, err := s.Volume(ctx, "c"); err == nil {
		t.Fatal("refused volume c was recorded")
	}
	if _, _, err := CreateVolume(ctx, s, spec21("b", 12<<20)); !errors.Is(err, meta.ErrExists) {
		t.Fatalf("b again, past the limit if it were new: %v, want ErrExists", err)
	}
	if _, _, err := ResizeVolume(ctx, s, "b", 40<<20); !errors.Is(err, ErrOvercommitted) {
		t.Fatalf("growing b past the limit: %v, want ErrOvercommitted", err)
	}
	if v, err := s.Volume(ctx, "b"); err != nil || v.Size != 10<<20 {
		t.Fatalf("b after a refused resize: %v %v", v, err)
	}
	if v, _, err := ResizeVolume(ctx, s, "b", 11<<20); err != nil || v.Size != 11<<20 {
		t.Fatalf("growing b a little: %v %v", v, err)
	}
}
