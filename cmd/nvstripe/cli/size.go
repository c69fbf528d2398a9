package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// sizeUnits are the suffixes parseSize accepts, binary and decimal.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// parseSize reads a byte count such as "4GiB", "128KiB", "1.5T" or "4096".
// Single-letter suffixes are binary (as in dd and qemu-img).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a size (examples: 4GiB, 128KiB, 1T, 4096)", s)
	}
	n := v * float64(mult)
	if n > 1<<62 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(n), nil
}
