package units

import (
	"errors"
	"flag"
	"strconv"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"512", 512}, {"512B", 512}, {"512 b", 512},
		{"4K", 4 << 10}, {"4k", 4 << 10}, {"4Ki", 4 << 10}, {"4KiB", 4 << 10},
		{"1G", 1 << 30}, {"1Gi", 1 << 30}, {"1GiB", 1 << 30}, {"1 GiB", 1 << 30}, {" 1GiB ", 1 << 30},
		{"1M", 1 << 20}, {"2T", 2 << 40}, {"1P", 1 << 50}, {"769.5GiB", 787968 << 20},
		{"1.5GiB", 3 << 29}, {"1.5G", 3 << 29}, {"0.5K", 512}, {".5K", 512}, {"4.K", 4096},
		{"7EiB", 7 << 60}, {"9223372036854775807", 1<<63 - 1},
	} {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	for _, c := range []struct{ in, why string }{
		{"", "empty"}, {"  ", "empty"},
		{"-1", "negative"}, {"-1G", "negative"},
		{"1.5B", "whole number"}, {"0.1K", "whole number"}, {"1.0000000001GiB", "whole number"},
		{"8EiB", "larger than"}, {"9223372036854775808", "larger than"}, {"10000PiB", "larger than"},
		{"1X", "unknown unit"}, {"1GiBB", "unknown unit"}, {"1e9", "unknown unit"}, {"1,000", "unknown unit"}, {"G", "not a number"},
		{"1..5G", "not a number"}, {".", "not a number"}, {strings.Repeat("9", 100), "longer than"},
	} {
		n, err := ParseSize(c.in)
		if err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error about %q", c.in, n, c.why)
			continue
		}
		if !errors.Is(err, ErrSize) || !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), "examples") {
			t.Errorf("ParseSize(%q) error %q: want ErrSize, %q and examples", c.in, err, c.why)
		}
	}
}

// TestParseSizeDecimal: a decimal unit is refused, suggesting the binary
// spelling of the same number.
func TestParseSizeDecimal(t *testing.T) {
	for in, want := range map[string]string{
		"10GB": "did you mean 10GiB? (sizes are binary: KiB, MiB, GiB, TiB)", "4kb": "did you mean 4KiB?",
		"1.5 TB": "did you mean 1.5TiB?", "2MB": "did you mean 2MiB?", "1PB": "1PiB", "1eb": "1EiB",
	} {
		n, err := ParseSize(in)
		if !errors.Is(err, ErrSize) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), strconv.Quote(in)) {
			t.Errorf("ParseSize(%q) = %d, %v; want an error naming it and %q", in, n, err, want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for _, c := range []struct {
		in   int64
		want string
	}{
		{0, "0 B"}, {512, "512 B"}, {1023, "1023 B"}, {1 << 10, "1 KiB"}, {128 << 10, "128 KiB"},
		{1 << 30, "1 GiB"}, {3 << 29, "1.5 GiB"}, {3<<29 + 1, "1.5 GiB"}, {1 << 40, "1 TiB"}, {1 << 62, "4 EiB"}, {1e9, "954 MiB"},
		{787968 << 20, "769.5 GiB"}, {5 << 38, "1.25 TiB"}, {3 << 18, "768 KiB"}, {1023 << 20, "1023 MiB"}, {1<<30 - 1<<20, "1023 MiB"},
		{1<<30 + 1, "1.0 GiB"}, {1<<30 + 4096, "1.0 GiB"}, {1<<63 - 1, "8.0 EiB"}, {-5, "-5 B"},
	} {
		if got := FormatSize(c.in); got != c.want {
			t.Errorf("FormatSize(%d) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestFormatParsesBack: every exact rendering reads back to the same count.
func TestFormatParsesBack(t *testing.T) {
	for _, n := range []int64{0, 1, 4096, 1 << 20, 3 << 29, 5 << 40, 787968 << 20, 5 << 38, 1<<63 - 1<<58} {
		s := FormatSize(n)
		got, err := ParseSize(s)
		if err != nil || got != n {
			t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, s, got, err)
		}
	}
}

func TestFlag(t *testing.T) {
	n := int64(256 << 20)
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	fs.Var(NewFlag(&n), "bw", "bandwidth")
	if got := fs.Lookup("bw").DefValue; got != "256 MiB" {
		t.Errorf("default shown as %q", got)
	}
	if err := fs.Parse([]string{"-bw", "1Gi"}); err != nil || n != 1<<30 {
		t.Errorf("-bw 1Gi: %d, %v", n, err)
	}
	if err := fs.Parse([]string{"-bw", "-1"}); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("-bw -1: %v", err)
	}
	if NewFlag(&n).Type() != "size" {
		t.Error("Type is not size")
	}
}
