// Package units is the one home of byte sizes as people write and read them:
// ParseSize for every command-line flag and spec that takes a size,
// FormatSize for every table and message that prints one, and Flag to bind
// a size to a flag. It is pure (no IO).
//
// Spellings accepted (case does not matter, a space may separate the number
// and the unit):
//
//	512, 512B               bytes
//	4K, 4Ki, 4KiB           binary: 4 * 1024 (likewise M, G, T, P, E)
//	1.5GiB                  a fraction, when the result is a whole number of bytes
//
// Sizes are binary only. A decimal unit (4KB, 10GB: 4 * 1000, 10 * 10^9)
// is refused with the binary spelling suggested ("did you mean 10GiB?"):
// volumes and slots are multiples of 4KiB, which a decimal size rarely is
// (10GB is not, 1TB happens to be), so accepting them would refuse some and
// quietly make others smaller than the GiB people usually mean. A decimal
// count is still written in bytes.
//
// The units and their values come from github.com/dustin/go-humanize. Where
// we differ from its ParseBytes:
//   - a single letter (K, M, G, ...) is binary here, as in truncate(1),
//     dd(1) and qemu-img; humanize reads "1G" as 10^9.
//   - a size that is not a whole number of bytes ("1.5B", "0.1K") is an
//     error; humanize rounds it down.
//   - negative numbers, exponents, thousands separators ("1,000") and sizes
//     past the largest int64 are errors; humanize accepts commas and
//     returns uint64.
package units

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
)

// ErrSize is the class of every error ParseSize returns.
var ErrSize = errors.New("invalid size")

// Examples lists spellings for usage text and error messages.
const Examples = "4096, 4K, 64KiB, 1Gi, 1.5GiB"

// binaryHint follows the suggestion for a decimal unit.
const binaryHint = "sizes are binary: KiB, MiB, GiB, TiB"

// maxInput bounds the text ParseSize looks at.
const maxInput = 64

// multipliers maps a lower-case unit to its value in bytes.
var multipliers = map[string]uint64{
	"": 1, "b": 1,
	"k": humanize.KiByte, "ki": humanize.KiByte, "kib": humanize.KiByte,
	"m": humanize.MiByte, "mi": humanize.MiByte, "mib": humanize.MiByte,
	"g": humanize.GiByte, "gi": humanize.GiByte, "gib": humanize.GiByte,
	"t": humanize.TiByte, "ti": humanize.TiByte, "tib": humanize.TiByte,
	"p": humanize.PiByte, "pi": humanize.PiByte, "pib": humanize.PiByte,
	"e": humanize.EiByte, "ei": humanize.EiByte, "eib": humanize.EiByte,
}

// decimalUnits maps a refused decimal unit, lower case, to the binary
// unit suggested instead.
var decimalUnits = map[string]string{"kb": "KiB", "mb": "MiB", "gb": "GiB", "tb": "TiB", "pb": "PiB", "eb": "EiB"}

// ParseSize reads a byte count written as described in the package doc.
// Every error wraps ErrSize and names the text it was given.
func ParseSize(s string) (int64, error) {
	bad := func(why string, a ...any) (int64, error) {
		return 0, fmt.Errorf("%w %q: %s (examples: %s)", ErrSize, s, fmt.Sprintf(why, a...), Examples)
	}
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return bad("empty")
	case len(t) > maxInput:
		return bad("longer than %d characters", maxInput)
	case t[0] == '-':
		return bad("negative")
	}
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	if bin, ok := decimalUnits[strings.ToLower(unit)]; ok {
		return 0, fmt.Errorf("%w %q: did you mean %s%s? (%s)", ErrSize, s, num, bin, binaryHint)
	}
	mult, ok := multipliers[strings.ToLower(unit)]
	if !ok {
		return bad("unknown unit %q", unit)
	}
	r, ok := parseDecimal(num)
	if !ok {
		return bad("%q is not a number", num)
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).SetUint64(mult)))
	if !r.IsInt() {
		return bad("not a whole number of bytes")
	}
	if !r.Num().IsInt64() {
		return bad("larger than %d bytes", int64(math.MaxInt64))
	}
	return r.Num().Int64(), nil
}

// parseDecimal reads digits with at most one '.', as an exact fraction.
func parseDecimal(num string) (*big.Rat, bool) {
	if num == "" || num == "." || strings.Count(num, ".") > 1 {
		return nil, false
	}
	return new(big.Rat).SetString(num)
}

// binaryUnits are the units FormatSize uses, largest first.
var binaryUnits = []struct {
	name string
	size int64
}{
	{"EiB", humanize.EiByte}, {"PiB", humanize.PiByte}, {"TiB", humanize.TiByte},
	{"GiB", humanize.GiByte}, {"MiB", humanize.MiByte}, {"KiB", humanize.KiByte},
}

// FormatSize renders n bytes for people, in the largest binary unit it
// reaches: exactly when n is a whole number of quarters of that unit
// ("1 GiB", "769.5 GiB", "1.25 TiB", "512 B"), otherwise rounded by
// humanize.IBytes to three figures ("1.0 GiB", "954 MiB"). Every size a
// command prints for people goes through it; tables that need the exact
// count print bytes (-o json does).
func FormatSize(n int64) string {
	for _, u := range binaryUnits {
		if n < u.size {
			continue
		}
		if n%(u.size/4) != 0 {
			return humanize.IBytes(uint64(n))
		}
		// Exact: fewer than 1024 units, in quarters (a float64 holds it).
		return strconv.FormatFloat(float64(n)/float64(u.size), 'f', -1, 64) + " " + u.name
	}
	return fmt.Sprintf("%d B", n)
}

// Flag binds a size to a command-line flag: it implements flag.Getter and
// pflag.Value (Type "size"), parsing with ParseSize.
type Flag struct{ p *int64 }

// NewFlag returns a flag value that stores into p, which keeps its value
// as the default.
func NewFlag(p *int64) *Flag { return &Flag{p: p} }

// Set parses s into the bound size.
func (f *Flag) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	*f.p = n
	return nil
}

// String formats the bound size; "" when none is bound or it is zero.
func (f *Flag) String() string {
	if f == nil || f.p == nil || *f.p == 0 {
		return ""
	}
	return FormatSize(*f.p)
}

// Get returns the bound size as an int64 (flag.Getter).
func (f *Flag) Get() any { return *f.p }

// Type names the value kind in usage text.
func (f *Flag) Type() string { return "size" }
