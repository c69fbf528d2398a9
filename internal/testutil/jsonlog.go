package testutil

import (
	"encoding/json"
	"strings"
	"testing"
)

// JSONRecords parses log output of slog's JSON handler, one record a line
// (blank lines skipped), failing t on a line that is not a JSON object.
func JSONRecords(t testing.TB, text string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}
