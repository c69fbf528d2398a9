package target

import (
	"strings"
	"testing"
)

func TestWriteANAStates(t *testing.T) {
	var b strings.Builder
	err := WriteANAStates(&b, []ANAEntry{{Listener: 0, Address: "127.0.0.1:4420", Group: 1, State: "optimized"},
		{Listener: 1, Address: "127.0.0.1:4421", Group: 2, State: "inaccessible"}})
	want := "listener 0 127.0.0.1:4420 group 1 optimized\nlistener 1 127.0.0.1:4421 group 2 inaccessible\n"
	if err != nil || b.String() != want {
		t.Fatalf("got %q, %v; want %q", b.String(), err, want)
	}
}
