package metricshttp

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestServe scrapes a counter over a real listener, checks that only GET
// (and HEAD) is served, and that Close stops the listener.
func TestServe(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "nvstripe_test_total", Help: "a test counter"})
	reg.MustRegister(c)
	c.Add(3)
	s, err := Serve("127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "nvstripe_test_total 3") {
		t.Fatalf("GET %s: %s\n%s", s.URL(), resp.Status, body)
	}
	resp, err = http.Post(s.URL(), "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST %s: %s, want 405", s.URL(), resp.Status)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(s.URL()); err == nil {
		t.Fatal("metrics served after Close")
	}
}

func TestServeBadAddress(t *testing.T) {
	for _, addr := range []string{"", "127.0.0.1:notaport"} {
		if s, err := Serve(addr, prometheus.NewRegistry()); err == nil {
			s.Close()
			t.Errorf("Serve(%q) listened", addr)
		}
	}
}
