package cli

import (
	"errors"
	"flag"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// sizeSpellings are what every size flag must accept, and the bytes each
// means.
var sizeSpellings = []struct {
	in   string
	want int64
}{
	{"512", 512}, {"4K", 4 << 10}, {"4KiB", 4 << 10}, {"1G", 1 << 30}, {"1Gi", 1 << 30},
	{"1GiB", 1 << 30}, {"1.5GiB", 3 << 29}, {"2T", 2 << 40},
}

// badSizes are what every size flag must refuse, with the words of the error.
var badSizes = []struct{ in, why string }{
	{"-1G", "negative"}, {"1.5B", "whole number"}, {"9EiB", "larger than"}, {"1X", "unknown unit"}, {"", "empty"},
	{"10GB", "did you mean 10GiB? (sizes are binary: KiB, MiB, GiB, TiB)"},
}

// compositeSizeFlags are flags whose value holds a size inside a larger
// spelling, with how to read the size back out of it.
var compositeSizeFlags = map[string]func(size string) (int64, error){
	"nvstripe target serve --ns": func(size string) (int64, error) {
		nss, err := target.ParseFileNamespaces([]string{"data0:" + size}, nil)
		if err != nil {
			return 0, err
		}
		return nss[0].Size, nil
	},
	"nvstripe volume create --qos-bps":       qosRate,
	"nvstripe volume create --qos-read-bps":  qosRate,
	"nvstripe volume create --qos-write-bps": qosRate,
	"nvstripe volume set --qos-bps":          qosRate,
	"nvstripe volume set --qos-read-bps":     qosRate,
	"nvstripe volume set --qos-write-bps":    qosRate,
}

// qosRate reads a size back out of a rate flag's SIZE/s.
func qosRate(size string) (int64, error) { return units.ParseRate(size + "/s") }

// looksLikeSize matches flags that take a size by name or by usage text.
var looksLikeSize = regexp.MustCompile(`(?i)size|chunk|bandwidth|bytes|SIZE`)

// TestEverySizeFlag walks the whole command tree: every flag that looks like
// it takes a size must be a units.Flag (or a listed composite), and each
// accepts the same spellings and refuses the same mistakes.
func TestEverySizeFlag(t *testing.T) {
	found := 0
	walkFlags(newRootCmd(), func(path string, f *pflag.Flag) {
		if parse, ok := compositeSizeFlags[path]; ok {
			found++
			checkSpellings(t, path, parse)
			return
		}
		if f.Value.Type() != "size" {
			if looksLikeSize.MatchString(f.Name + " " + f.Usage) {
				t.Errorf("%s (%s) looks like a size but is a %s: bind it with units.NewFlag, or list it in compositeSizeFlags", path, f.Usage, f.Value.Type())
			}
			return
		}
		found++
		checkSpellings(t, path, func(s string) (int64, error) {
			if err := f.Value.Set(s); err != nil {
				return 0, err
			}
			return f.Value.(flag.Getter).Get().(int64), nil
		})
	})
	// volume create --size/--chunk, volume resize --size, ns add --size,
	// cluster init --slot-size, demo --size, controller --bandwidth,
	// target serve --ns and --block-size.
	if found < 9 {
		t.Errorf("found %d size flags, want at least 9: is the walk missing commands?", found)
	}
}

func checkSpellings(t *testing.T, path string, parse func(string) (int64, error)) {
	t.Helper()
	for _, c := range sizeSpellings {
		if got, err := parse(c.in); err != nil || got != c.want {
			t.Errorf("%s %q = %d, %v; want %d", path, c.in, got, err, c.want)
		}
	}
	for _, c := range badSizes {
		_, err := parse(c.in)
		if err == nil || !errors.Is(err, units.ErrSize) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s %q: error %v, want units.ErrSize saying %q", path, c.in, err, c.why)
		}
	}
}

// walkFlags calls fn with every flag of c and its subcommands, named
// "nvstripe sub cmd --flag".
func walkFlags(c *cobra.Command, fn func(path string, f *pflag.Flag)) {
	seen := map[*pflag.Flag]bool{}
	visit := func(f *pflag.Flag) {
		if !seen[f] {
			seen[f] = true
			fn(c.CommandPath()+" --"+f.Name, f)
		}
	}
	c.LocalFlags().VisitAll(visit)
	for _, sub := range c.Commands() {
		walkFlags(sub, fn)
	}
}

// TestSizesPrintHuman: tables and messages print sizes as units.FormatSize.
func TestSizesPrintHuman(t *testing.T) {
	for n, want := range map[int64]string{1 << 30: "1 GiB", 128 << 10: "128 KiB", 3 << 29: "1.5 GiB", 787968 << 20: "769.5 GiB", 100: "100 B"} {
		if got := units.FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
