package demo

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
)

// TestFlagDefaults: `nvstripe demo` without flags asks for what Options'
// own defaults are.
func TestFlagDefaults(t *testing.T) {
	var f Options
	fl := pflag.NewFlagSet("demo", pflag.ContinueOnError)
	f.AddFlags(fl)
	if err := fl.Parse(nil); err != nil {
		t.Fatal(err)
	}
	var d Options
	d.ensureDefaults()
	if f.K != d.K || f.M != d.M || f.Size != d.Size || f.NBDListen != d.NBDListen || f.Dir != "" || f.Keep {
		t.Errorf("flags %+v, defaults %+v", f, d)
	}
}

// TestTempDir: without Dir, Run works in a new temporary directory that
// it removes at the end, unless Keep.
func TestTempDir(t *testing.T) {
	for _, keep := range []bool{false, true} {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // Run stops as soon as it has started
		Run(ctx, Options{Keep: keep})
		left, _ := filepath.Glob(filepath.Join(tmp, "nvstripe-demo-*"))
		if keep != (len(left) == 1) {
			t.Errorf("keep %v: left %q", keep, left)
		}
	}
}
