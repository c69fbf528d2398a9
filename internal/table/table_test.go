package table

import (
	"fmt"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	var b strings.Builder
	w := New(&b)
	fmt.Fprintln(w, "NAME\tSIZE")
	fmt.Fprintln(w, "volume-1\t4")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := "NAME      SIZE\nvolume-1  4\n"; b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}

func TestNewRight(t *testing.T) {
	var b strings.Builder
	w := NewRight(&b)
	fmt.Fprintln(w, "R/S\tBYTES\t")
	fmt.Fprintln(w, "1\t1024\t")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := "  R/S  BYTES\n    1   1024\n"; b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}
