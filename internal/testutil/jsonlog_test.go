package testutil

import "testing"

// TestJSONRecords: every line of slog JSON output comes back as a map
// (blank lines skipped); a line that is not JSON fails the test.
func TestJSONRecords(t *testing.T) {
	text := `{"level":"INFO","msg":"one","n":1}` + "\n\n" + `{"level":"WARN","msg":"two"}` + "\n"
	rs := JSONRecords(t, text)
	if len(rs) != 2 || rs[0]["msg"] != "one" || rs[0]["n"] != 1.0 || rs[1]["level"] != "WARN" {
		t.Fatalf("records %v", rs)
	}
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		JSONRecords(f, "{\"msg\":\"ok\"}\nnot json\n")
	}()
	<-done
	if f.failed == "" {
		t.Fatal("a line that is not JSON passed")
	}
}
