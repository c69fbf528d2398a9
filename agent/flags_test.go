package agent

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/config"
)

// TestMapFlags: the defaults of a foreground map, an NBD export's spec,
// and two frontends at once refused as a usage mistake.
func TestMapFlags(t *testing.T) {
	parse := func(args ...string) *MapFlags {
		var f MapFlags
		fl := pflag.NewFlagSet("map", pflag.ContinueOnError)
		f.AddFlags(fl)
		if err := fl.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &f
	}
	f := parse("--nbd-listen", "127.0.0.1:0")
	if !f.Foreground.WaitSize || f.Foreground.ListDir != DefaultMapSocketDir || f.Node.NBDTLS.Mode != "off" {
		t.Errorf("defaults %+v", f)
	}
	spec, chose, err := f.Spec("v")
	if err != nil || spec.Volume != "v" || spec.Via != ViaNBDListen || chose != "" {
		t.Errorf("NBD export: %+v %q %v", spec, chose, err)
	}
	if _, _, err := parse("--nbd-listen", "127.0.0.1:0", "--fuse", t.TempDir()).Spec("v"); !config.IsUsage(err) {
		t.Errorf("two frontends: %v, want a usage mistake", err)
	}
}
