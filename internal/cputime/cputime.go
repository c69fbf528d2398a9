// Package cputime reads CPU time, user plus system: this process's
// (getrusage) and another process's (/proc/PID/stat, all its threads), for
// the CPU-per-GiB figures of benchmarks and bench tools. It is safe for
// concurrent use.
package cputime

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Self is the CPU time this process has used so far.
func Self() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru) // cannot fail for RUSAGE_SELF
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ticksPerSecond is Linux's USER_HZ, the unit of /proc/PID/stat's times
// (100 on every architecture Go supports on Linux).
const ticksPerSecond = 100

// Process is the CPU time process pid (all its threads) has used so far,
// from /proc/PID/stat; the error says when there is no /proc or no such
// process.
func Process(pid int) (time.Duration, error) {
	name := "/proc/" + strconv.Itoa(pid) + "/stat"
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	return parseStat(name, b)
}

// parseStat reads utime and stime (fields 14 and 15) from a stat line. The
// command name (field 2) may hold spaces and parentheses: fields are
// counted from its last ")".
func parseStat(name string, b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("%s: cannot parse %q", name, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%s: cannot parse %q", name, b)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%s: cannot parse %q", name, b)
	}
	return time.Duration(u+s) * time.Second / ticksPerSecond, nil
}
