package cputime

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	line := "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 12345 1000 200\n"
	got, err := parseStat("stat", []byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := 3250 * time.Millisecond; got != want {
		t.Fatalf("parseStat = %v, want %v (325 ticks)", got, want)
	}
	for _, bad := range []string{"", "no paren", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 0"} {
		if _, err := parseStat("stat", []byte(bad)); err == nil {
			t.Errorf("parseStat(%q) took a malformed line", bad)
		}
	}
}

// TestSelfAndProcessGrow burns CPU and checks that both readings move.
func TestSelfAndProcessGrow(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux's /proc")
	}
	p0, err := Process(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	s0 := Self()
	for x, start := uint64(1), Self(); Self()-start < 50*time.Millisecond; x = x*6364136223846793005 + 1 {
		_ = x
	}
	if s := Self() - s0; s < 50*time.Millisecond {
		t.Fatalf("Self grew by %v over a 50ms CPU burn", s)
	}
	p1, err := Process(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if p1 <= p0 {
		t.Fatalf("Process(self) did not grow over a 50ms CPU burn: %v then %v", p0, p1)
	}
	if _, err := Process(-1); err == nil {
		t.Fatal("Process(-1) found a process")
	}
}
