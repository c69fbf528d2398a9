package testutil

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSS is the resident memory of process pid in bytes (VmRSS of
// /proc/PID/status); the error says when there is no /proc, no such
// process or no VmRSS line.
func RSS(pid int) (int64, error) {
	name := "/proc/" + strconv.Itoa(pid) + "/status"
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", name, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("%s: no VmRSS line", name)
}
