package units

import "strings"

// ParseRate reads a byte rate: a size as ParseSize reads it, optionally
// followed by "/s" ("100MiB/s", "1GiB/s", "0"). Errors are ParseSize's
// (class ErrSize).
func ParseRate(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if r, ok := strings.CutSuffix(strings.ToLower(t), "/s"); ok {
		t = t[:len(r)]
	}
	return ParseSize(t)
}

// FormatRate renders a byte rate for people: FormatSize and "/s".
func FormatRate(n int64) string { return FormatSize(n) + "/s" }
