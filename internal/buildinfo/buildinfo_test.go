package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	v := Read()
	if v.Go != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH || v.Version == "" {
		t.Errorf("Read() = %+v", v)
	}
	s := Info{Version: "v1.2.3", Commit: "abc", Modified: true, Go: "go1.26", Platform: "linux/amd64"}.String()
	if s != "nvstripe v1.2.3 commit abc (modified) go1.26 linux/amd64" {
		t.Errorf("String() = %q", s)
	}
	if s := (Info{Version: "v1", Go: "go", Platform: "p"}).String(); strings.Contains(s, "commit") {
		t.Errorf("String() without a commit = %q", s)
	}
}
