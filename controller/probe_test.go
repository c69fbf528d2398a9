package controller

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta"
)

// TestProbeTCPFrom: the probe connects from the source address it is
// given (the one --host-traddr pins the controller's storage traffic to),
// and answers false for a path nobody listens on.
func TestProbeTCPFrom(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peers := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			peers <- c.RemoteAddr().(*net.TCPAddr).IP.String()
			c.Close()
		}
	}()
	ns := &meta.NamespaceRecord{ID: "n", Paths: []meta.PathRecord{{Addr: "tcp://" + ln.Addr().String()}}}
	for src, want := range map[string]string{"127.0.0.2": "127.0.0.2", "": "127.0.0.1"} {
		if !ProbeTCPFrom(5*time.Second, src)(context.Background(), ns) {
			if src != "" {
				t.Skipf("cannot connect from %s (Linux has all of 127/8 on lo)", src)
			}
			t.Fatalf("probe from %q: no answer", src)
		}
		if got := <-peers; got != want {
			t.Errorf("probe from %q came from %s, want %s", src, got, want)
		}
	}
	ln.Close()
	if ProbeTCPFrom(time.Second, "127.0.0.1")(context.Background(), ns) {
		t.Error("a path nobody listens on answered the probe")
	}
}
