package cli

import (
	"testing"
)

// TestVolumeQoSFlags: volume create takes the --qos-* flags, volume info
// and ls show them, volume set changes only the flags given (0 removes a
// limit); a bad value (a decimal unit, a negative count, a burst past the
// cap) and a set with no flag are usage errors that change nothing.
func TestVolumeQoSFlags(t *testing.T) {
	a := initCluster(t, "qos")
	a.addHosts(0, 3, "64MiB")
	a.ok("created", "volume", "create", "v", "--size", "8MiB", "--k", "2", "--m", "1", "--qos-iops", "2000", "--qos-read-bps", "10MiB/s")
	a.ok(`"read_bps": 10485760`, "volume", "info", "v", "-o", "json")
	a.ok("qos iops=2000 read_bps=10 MiB/s burst=1s", "volume", "info", "v")
	a.ok("qos: write_iops=50 read_bps=10 MiB/s burst=250ms", "volume", "set", "v", "--qos-iops", "0", "--qos-write-iops", "50", "--qos-burst", "250ms")
	for _, bad := range [][]string{
		{"--qos-bps", "10MB/s"}, {"--qos-iops", "-5"}, {"--qos-burst", "2m"}, {"--qos-read-iops", "many"}, {},
	} {
		out, err := a.run(append([]string{"volume", "set", "v"}, bad...)...)
		if ExitCode(err) != 2 {
			t.Errorf("volume set %q: %v (exit %d), want a usage error\n%s", bad, err, ExitCode(err), out)
		}
	}
	a.ok("write_iops=50 read_bps=10 MiB/s burst=250ms", "volume", "ls")
	a.fails("not found", "volume", "set", "nope", "--qos-iops", "1")
}
