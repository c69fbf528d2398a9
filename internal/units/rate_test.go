package units

import (
	"errors"
	"testing"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]int64{"100MiB/s": 100 << 20, "1GiB/S": 1 << 30, "4096": 4096, "0": 0, " 2K/s ": 2048} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/s", "10MB/s", "-1/s", "1MiB/m"} {
		if _, err := ParseRate(in); !errors.Is(err, ErrSize) {
			t.Errorf("ParseRate(%q): %v, want ErrSize", in, err)
		}
	}
	if got := FormatRate(100 << 20); got != "100 MiB/s" {
		t.Errorf("FormatRate = %q", got)
	}
}
