package main

import (
	"os"
	"testing"
)

// The test binary plays the tool's child processes (sinks, source,
// consumer) when FLOOR_AS_TOOL is set: measure starts them as
// os.Args[0] -role ROLE.
func TestMain(m *testing.M) {
	if os.Getenv("FLOOR_AS_TOOL") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// Both patterns move every request through real processes and report
// the CPU of each side per GiB.
func TestMeasureMovesTheTraffic(t *testing.T) {
	t.Setenv("FLOOR_AS_TOOL", "1")
	for _, pattern := range []string{"write", "read"} {
		r, err := measure(pattern, 32, true, true)
		if err != nil {
			t.Fatalf("%s: %v", pattern, err)
		}
		if r.GiB != 32.0/1024 || r.MiBps <= 0 || r.Pattern != pattern || !r.Codec || !r.SinkCopying {
			t.Errorf("%s: %+v: want 32 MiB moved at a positive rate, codec and sink copy on", pattern, r)
		}
		if r.ClientMs <= 0 && r.SinksMs <= 0 {
			t.Errorf("%s: %+v: no CPU time counted on either side", pattern, r)
		}
	}
}

func TestRunRefusesAnUnknownPattern(t *testing.T) {
	if err := run("append", 1, false, false, "json"); err == nil {
		t.Fatal("-pattern append ran")
	}
}
