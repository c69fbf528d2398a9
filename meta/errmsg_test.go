package meta

import (
	"errors"
	"testing"
)

// TestErrorMessages: errors name records for people (no raw etcd keys) and
// do not repeat their class's words, yet keep their class.
func TestErrorMessages(t *testing.T) {
	s := setup(t, 1, 0, 0)
	ctx := testCtx(t)
	_, dup := s.AddHost(ctx, "h0", nil)
	_, missing := s.Namespace(ctx, "t9-n1")
	_, task := s.Task(ctx, "x1")
	for _, tc := range []struct {
		err   error
		class error
		want  string
	}{
		{dup, ErrExists, `host "h0" already exists`},
		{missing, ErrNotFound, `namespace "t9-n1" not found`},
		{task, ErrNotFound, `task "x1" not found`},
	} {
		if tc.err == nil || tc.err.Error() != tc.want || !errors.Is(tc.err, tc.class) {
			t.Errorf("error %v, want %q of class %v", tc.err, tc.want, tc.class)
		}
	}
	k := keys{root: "/nvstripe/c/"}
	for key, want := range map[string]string{k.segment("v", 3): "segment v/3", k.ownerRW("v"): `owner of volume "v"`,
		k.cluster(): "the cluster record", "/other/x": "/other/x", k.hosts(): "host records"} {
		if got := k.describe(key); got != want {
			t.Errorf("describe(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestParseLabels(t *testing.T) {
	m, err := ParseLabels([]string{"rack=r1", "row="})
	if err != nil || len(m) != 2 || m["rack"] != "r1" || m["row"] != "" {
		t.Errorf("ParseLabels = %v, %v", m, err)
	}
	for _, bad := range []string{"rack", "=r1"} {
		if _, err := ParseLabels([]string{bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", bad, err)
		}
	}
}
