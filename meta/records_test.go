package meta

import (
	"strings"
	"testing"
)

// TestFenceWarning: a namespace that cannot fence is warned about, saying
// whether it takes shards; one that can fence is not.
func TestFenceWarning(t *testing.T) {
	for _, c := range []struct {
		rec  NamespaceRecord
		want string
	}{
		{NamespaceRecord{ID: "a"}, ""},
		{NamespaceRecord{ID: "b", Unfenced: true}, "namespace b cannot fence a stale owner (no NVMe reservations): it takes no shards"},
		{NamespaceRecord{ID: "c", Unfenced: true, AllowUnfenced: true}, "namespace c cannot fence a stale owner (no NVMe reservations); allowed"},
	} {
		if got := c.rec.FenceWarning(); (c.want == "") != (got == "") || !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %q, want %q...", c.rec.ID, got, c.want)
		}
	}
}
