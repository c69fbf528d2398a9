package pool

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nvstripe/nvstripe/health"
)

func TestSpec(t *testing.T) {
	for _, s := range []Spec{
		{Addr: "nowhere:1", Profile: "lan"},
		{Addr: "127.0.0.1:70000", Profile: "lan"},
		{Addr: "127.0.0.1:1", Profile: "fast"},
		{Addr: "127.0.0.1:1", Profile: "lan", Labels: []string{"rack"}},
		{Addr: "127.0.0.1:1", Profile: "lan", KeyFile: filepath.Join(t.TempDir(), "missing")},
	} {
		if _, err := s.TargetMember("h1", nil); !errors.Is(err, ErrSpec) {
			t.Errorf("%+v: %v, want ErrSpec", s, err)
		}
	}
	if _, err := (Spec{Join: []string{"1.2.3.4:1"}}).TargetMember("", nil); !errors.Is(err, ErrSpec) {
		t.Errorf("join without an address: %v", err)
	}
	if _, err := (Spec{Addr: "127.0.0.1:1", Profile: "lan"}).TargetMember("", nil); !errors.Is(err, ErrSpec) {
		t.Errorf("no host: %v", err)
	}
	if c, err := (Spec{}).TargetMember("", nil); err != nil || c.BindAddr != "" {
		t.Errorf("no gossip: %+v, %v", c, err)
	}
	c, err := Spec{Addr: "127.0.0.1:7946", Profile: "local", Labels: []string{"rack=r1"}}.TargetMember("h1", []string{"n1"})
	if err != nil || c.BindAddr != "127.0.0.1" || c.BindPort != 7946 || c.Profile != health.ProfileLocal ||
		c.Meta.Role != health.RoleTarget || c.Meta.Host != "h1" || c.Meta.Labels["rack"] != "r1" {
		t.Errorf("TargetMember = %+v, %v", c, err)
	}
	keyFile := filepath.Join(t.TempDir(), "gossip.key")
	os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(make([]byte, 24))), 0o600)
	c, err = Spec{Addr: "127.0.0.1:7946", Profile: "lan", KeyFile: keyFile, Cluster: "prod"}.TargetMember("h1", nil)
	if err != nil || len(c.Key) != 24 || c.Label != "nvstripe/prod" {
		t.Errorf("with a key and a cluster: key of %d bytes, label %q, %v", len(c.Key), c.Label, err)
	}
}
