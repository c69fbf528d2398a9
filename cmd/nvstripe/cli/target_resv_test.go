package cli

import (
	"path/filepath"
	"testing"
)

// TestTargetServeKeepsReservations: every namespace of `target serve`
// keeps its reservations in DIR/NAME.resv, so a restarted target still
// fences the writers it fenced.
func TestTargetServeKeepsReservations(t *testing.T) {
	dir := t.TempDir()
	f := targetServeFlags{dir: dir, nqn: "nqn.x:y", ns: []string{"a:1MiB", "b:1MiB"}, allowHosts: []string{"any"},
		listen: "127.0.0.1:0"}
	cfg, devs, err := f.config()
	for _, d := range devs {
		defer d.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a", "b"} {
		if got, want := cfg.Subsystems[0].Namespaces[i].ReservationFile, filepath.Join(dir, name+".resv"); got != want {
			t.Errorf("namespace %s: reservation file %q, want %q", name, got, want)
		}
	}
}
