package ec

import (
	"fmt"
	"strings"
	"testing"
)

// TestSelfTestGolden recomputes every golden parity checksum on both paths
// and prints the table on mismatch (for a deliberate format migration only).
func TestSelfTestGolden(t *testing.T) {
	var b strings.Builder
	bad := false
	for _, v := range selfTestVectors() {
		got, err := selfTestGeometry(v.k, v.m)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "\t\t{k: %d, m: %d, parity: %#08x},\n", v.k, v.m, got)
		bad = bad || got != v.parity
	}
	if bad {
		t.Errorf("golden parity checksums differ; computed table:\n%s", b.String())
	}
}

func TestSelfTest(t *testing.T) {
	if err := SelfTest(); err != nil {
		t.Fatal(err)
	}
}
