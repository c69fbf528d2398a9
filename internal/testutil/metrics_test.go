package testutil

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMetrics: samples come back by name and labels as written, comments
// and blank lines are skipped; a line without a value and a status other
// than 200 are errors.
func TestMetrics(t *testing.T) {
	page := "# HELP a_total An A.\n# TYPE a_total counter\na_total 3\n\nb{x=\"1 2\",y=\"z\"} 2.5\nc +Inf\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			w.Write([]byte(page))
		case "/bad":
			w.Write([]byte("a_total\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	got, err := Metrics(t.Context(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"a_total": 3, `b{x="1 2",y="z"}`: 2.5}
	if got["c"] <= 1e308 || len(got) != 3 {
		t.Fatalf("got %v, want c +Inf among 3 samples", got)
	}
	delete(got, "c")
	if !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, path := range []string{"/bad", "/missing"} {
		if _, err := Metrics(t.Context(), srv.URL+path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming the page", path, err)
		}
	}
}
