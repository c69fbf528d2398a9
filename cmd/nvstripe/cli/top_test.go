package cli

import (
	"strings"
	"testing"
)

// TestTopIntervalIsUsage: `top --interval` not above 0 is a usage error
// (exit status 2) naming the flag; it used to panic in time.NewTicker
// after the first reading.
func TestTopIntervalIsUsage(t *testing.T) {
	for _, iv := range []string{"0s", "-1s"} {
		_, _, err := run(t, "top", "--interval", iv, "--metrics", "127.0.0.1:1", "--count", "1")
		if err == nil || !strings.Contains(err.Error(), "--interval "+iv+": give one above 0") || ExitCode(err) != 2 {
			t.Errorf("top --interval %s: %v (exit %d), want a usage error naming --interval", iv, err, ExitCode(err))
		}
	}
}
