package pprofhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/internal/pprofhttp"
)

func TestCheckAddrRefusesAllButLoopback(t *testing.T) {
	ctx := context.Background()
	for _, addr := range []string{":6060", "0.0.0.0:6060", "[::]:6060", "10.1.2.3:6060", "192.168.0.1:0"} {
		err := pprofhttp.CheckAddr(ctx, addr, false)
		if !errors.Is(err, pprofhttp.ErrNotLoopback) {
			t.Errorf("CheckAddr(%q) = %v, want ErrNotLoopback", addr, err)
		} else if !strings.Contains(err.Error(), "--pprof-any") {
			t.Errorf("CheckAddr(%q) = %v: does not say how to override", addr, err)
		}
		if err := pprofhttp.CheckAddr(ctx, addr, true); err != nil {
			t.Errorf("CheckAddr(%q, any) = %v, want nil", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:6060", "127.1.2.3:0", "[::1]:6060", "localhost:6060"} {
		if err := pprofhttp.CheckAddr(ctx, addr, false); err != nil {
			t.Errorf("CheckAddr(%q) = %v, want nil", addr, err)
		}
	}
	if err := pprofhttp.CheckAddr(ctx, "6060", false); err == nil || errors.Is(err, pprofhttp.ErrNotLoopback) {
		t.Errorf("CheckAddr(6060) = %v, want a HOST:PORT error", err)
	}
}

func TestStartServesProfiles(t *testing.T) {
	if s, err := pprofhttp.Start(context.Background(), pprofhttp.Flags{}); s != nil || err != nil {
		t.Fatalf("Start without an address = %v, %v; want nothing", s, err)
	}
	if _, err := pprofhttp.Start(context.Background(), pprofhttp.Flags{Addr: "0.0.0.0:0"}); !errors.Is(err, pprofhttp.ErrNotLoopback) {
		t.Fatalf("Start(0.0.0.0:0) = %v, want ErrNotLoopback", err)
	}
	s, err := pprofhttp.Start(context.Background(), pprofhttp.Flags{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get("http://" + s.Addr() + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("goroutine profile: %s\n%.200s", resp.Status, body)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := http.Get("http://" + s.Addr() + "/debug/pprof/"); err == nil {
		t.Fatal("still serving after Close")
	}
}
