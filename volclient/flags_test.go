package volclient

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/nvmeof/auth"
)

// TestDHCHAPFiles: secrets come from their files; an empty or malformed
// one, or a controller secret alone, is a usage mistake.
func TestDHCHAPFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(s), 0o600)
		return p
	}
	s1, _ := auth.GenerateSecret(rand.Reader, 1, 0)
	s2, _ := auth.GenerateSecret(rand.Reader, 0, 0)
	host, ctrl := write("host", s1.String()+"\n"), write("ctrl", s2.String())
	if secret, c, err := (&DHCHAPFiles{SecretFile: host, CtrlFile: ctrl}).Load(); secret != s1.String() || c != s2.String() || err != nil {
		t.Errorf("both: %q %q %v", secret, c, err)
	}
	if secret, c, err := (&DHCHAPFiles{}).Load(); secret != "" || c != "" || err != nil {
		t.Errorf("none: %q %q %v", secret, c, err)
	}
	for name, f := range map[string]DHCHAPFiles{"ctrl alone": {CtrlFile: ctrl}, "empty": {SecretFile: write("empty", "\n")},
		"malformed": {SecretFile: write("bad", "DHHC-1:00:nope:")}} {
		if _, _, err := f.Load(); !config.IsUsage(err) {
			t.Errorf("%s: %v, want a usage mistake", name, err)
		}
	}
}

// TestNamespaceFlagsSpec: the required flags and the paths are checked as
// usage mistakes; a complete set makes the spec.
func TestNamespaceFlagsSpec(t *testing.T) {
	f := NamespaceFlags{Host: "h", NQN: "nqn.x", NSID: 1, Paths: []string{"tcp://127.0.0.1:4420"}, Size: 1 << 30, AllowUnfenced: true}
	spec, err := f.Spec()
	if err != nil || spec.Host != "h" || spec.NSID != 1 || len(spec.Paths) != 1 || spec.Size != 1<<30 || !spec.AllowUnfenced {
		t.Errorf("spec %+v %v", spec, err)
	}
	for name, g := range map[string]NamespaceFlags{"no path": {Host: "h", NQN: "nqn.x", NSID: 1},
		"bad path": {Host: "h", NQN: "nqn.x", NSID: 1, Paths: []string{"udp://x"}}} {
		if _, err := g.Spec(); !config.IsUsage(err) {
			t.Errorf("%s: %v, want a usage mistake", name, err)
		}
	}
}
