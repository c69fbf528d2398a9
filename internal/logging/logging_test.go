package logging

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

func TestNewAndLogf(t *testing.T) {
	var b bytes.Buffer
	l, err := New(&b, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	logf := Logf(l.With("component", "agent"))
	logf("[DEBUG] memberlist: %s", "hidden")
	logf("[WARN] memberlist: suspect %s", "n1")
	logf("volume %s mapped", "v")
	recs := testutil.JSONRecords(t, b.String())
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2 (debug filtered):\n%s", len(recs), b.String())
	}
	if recs[0]["level"] != "WARN" || recs[0]["msg"] != "memberlist: suspect n1" || recs[0]["component"] != "agent" || recs[0]["time"] == nil {
		t.Errorf("warn record %v", recs[0])
	}
	if recs[1]["level"] != "INFO" || recs[1]["msg"] != "volume v mapped" {
		t.Errorf("info record %v", recs[1])
	}
	for _, bad := range [][2]string{{"xml", "info"}, {"text", "loud"}} {
		if _, err := New(&b, bad[0], bad[1]); err == nil {
			t.Errorf("New(%q, %q): no error", bad[0], bad[1])
		}
	}
	b.Reset()
	l, _ = New(&b, "text", "debug")
	Logf(l)("[ERR] boom")
	if !strings.Contains(b.String(), "level=ERROR") || !strings.Contains(b.String(), "msg=boom") {
		t.Errorf("text record %q", b.String())
	}
}
