package capacity

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/meta"
)

// TestVolumeFlagsSpec: --size is required; checksums and the write log are
// on by default, bound to their place; without checksums the log is off
// unless asked for, and nothing is bound.
func TestVolumeFlagsSpec(t *testing.T) {
	spec := func(args ...string) (meta.VolumeSpec, error) {
		var f VolumeFlags
		fl := pflag.NewFlagSet("create", pflag.ContinueOnError)
		f.AddFlags(fl)
		if err := fl.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f.Spec("v", fl.Changed("write-log"))
	}
	if _, err := spec(); !config.IsUsage(err) {
		t.Errorf("no --size: %v, want a usage mistake", err)
	}
	s, err := spec("--size", "1GiB")
	if l := s.Layout; err != nil || s.Size != 1<<30 || l.K != 4 || l.M != 2 || l.Chunk != 128<<10 || l.Checksum != meta.ChecksumCRC32C || l.WriteLog != meta.WriteLogPPL || !s.BindChecksums {
		t.Errorf("defaults: %+v %v", s, err)
	}
	if s, _ := spec("--size", "1GiB", "--bind-checksums=false"); s.BindChecksums || s.Layout.Checksum != meta.ChecksumCRC32C {
		t.Errorf("--bind-checksums=false: %+v", s)
	}
	if s, _ := spec("--size", "1GiB", "--checksum", "none"); s.Layout.Checksum != "" || s.Layout.WriteLog != "" || s.BindChecksums {
		t.Errorf("--checksum none: %+v", s.Layout)
	}
	if s, _ := spec("--size", "1GiB", "--checksum", "none", "--write-log", "ppl"); s.Layout.WriteLog != meta.WriteLogPPL {
		t.Errorf("--checksum none --write-log ppl: %+v", s.Layout)
	}
	if s, _ := spec("--size", "1GiB", "--write-log", "none"); s.Layout.WriteLog != "" || s.Layout.Checksum == "" {
		t.Errorf("--write-log none: %+v", s.Layout)
	}
}
