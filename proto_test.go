package nvstripe_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// protoInclude is where Debian's libprotobuf-dev puts the well-known types
// (the Makefile's PROTO_INCLUDE).
const protoInclude = "/usr/include"

// TestProtoGenerated fails when the committed *.pb.go files are not what
// `make proto` generates from the .proto files: it runs `make proto` into a
// temporary folder and compares every generated file byte for byte with
// the committed one, and every committed *.pb.go with a generated one (a
// file left over from a removed .proto fails too). The headers name the
// protoc and plugin versions, so a different version fails as well: the
// pinned ones are in the Makefile (and installed by .ci/run).
func TestProtoGenerated(t *testing.T) {
	tools := protoTools(t)
	out := t.TempDir()
	cmd := exec.Command("make", "-s", "proto", "PROTO_OUT="+out, "PROTO_INCLUDE="+protoInclude)
	cmd.Env = append(os.Environ(), "PATH="+tools)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make proto: %v\n%s", err, b)
	}
	generated := pbFiles(t, out)
	if len(generated) == 0 {
		t.Fatal("make proto generated no *.pb.go file")
	}
	for rel := range generated {
		want, err := os.ReadFile(filepath.Join(out, rel))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(rel)
		if err != nil {
			t.Errorf("%s: not committed (%v): run make proto", rel, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: it differs from what make proto generates (first difference at line %d); run make proto and commit",
				rel, firstDiffLine(got, want))
		}
	}
	for rel := range pbFiles(t, ".") {
		if !generated[rel] {
			t.Errorf("%s: committed but no .proto generates it", rel)
		}
	}
}

// protoTools returns a PATH with protoc and both plugins (the plugins are
// looked up in $(go env GOPATH)/bin too, where `make proto-tools` installs
// them), or skips the test saying what is missing.
func protoTools(t *testing.T) string {
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		t.Skipf("skipping: go env GOPATH: %v", err)
	}
	path := filepath.Join(strings.TrimSpace(string(gopath)), "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
	var missing []string
	for _, tool := range []string{"make", "protoc", "protoc-gen-go", "protoc-gen-go-grpc"} {
		if !onPath(tool, path) {
			missing = append(missing, tool)
		}
	}
	if _, err := os.Stat(filepath.Join(protoInclude, "google/protobuf/timestamp.proto")); err != nil {
		missing = append(missing, protoInclude+"/google/protobuf/timestamp.proto")
	}
	if len(missing) > 0 {
		t.Skipf("skipping: %s missing (apt-get install protobuf-compiler libprotobuf-dev make; make proto-tools)",
			strings.Join(missing, ", "))
	}
	return path
}

func onPath(tool, path string) bool {
	for _, dir := range filepath.SplitList(path) {
		if fi, err := os.Stat(filepath.Join(dir, tool)); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}

// pbFiles returns the *.pb.go files under root, relative to it.
func pbFiles(t *testing.T, root string) map[string]bool {
	t.Helper()
	files := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".pb.go") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// firstDiffLine returns the 1-based line where a and b first differ.
func firstDiffLine(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	return bytes.Count(a[:i], []byte("\n")) + 1
}
