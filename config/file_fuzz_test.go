package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzReadFile feeds config files (/etc/nvstripe/nvstripe.yaml, or the one
// --config names) to ReadFile and Resolve. Nothing may panic; a file either
// fails to read with an error that names it, or its every setting is in
// force from "file PATH" as written (the etcd endpoints one by one), and
// the schema written back as YAML reads back the same. The seed corpus is
// in testdata/fuzz.
func FuzzReadFile(f *testing.F) {
	f.Add("etcd:\n  endpoints: [10.0.0.1:2379, 10.0.0.2:2379]\n  cacert: /etc/nvstripe/ca.pem\ncluster: prod\n")
	f.Add("host_nqn: nqn.2014-08.org.nvmexpress:uuid:1\nadmin:\n  controller: unix:/run/nvstripe/controller.sock\n")
	f.Add("etcd: {endpoints: [a], bogus: 1}\n")
	f.Fuzz(func(t *testing.T, text string) {
		path := filepath.Join(t.TempDir(), "nvstripe.yaml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		file, err := ReadFile(path, true)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		checkResolved(t, file, path)
		out, err := yaml.Marshal(file)
		if err != nil {
			t.Fatal(err)
		}
		var again File
		if err := yaml.UnmarshalStrict(out, &again); err != nil || !reflect.DeepEqual(normal(&again), normal(file)) {
			t.Fatalf("file %+v written as %q reads back as %+v (%v)", file, out, again, err)
		}
	})
}

// checkResolved checks that every setting file sets is in force from it.
func checkResolved(t *testing.T, file *File, path string) {
	vs := Resolve(Layers{File: file, FilePath: path})
	for k, v := range file.values() {
		if SourceOf(vs, k) != "file "+path {
			t.Fatalf("setting %s=%q of the file: in force from %q", k, v, SourceOf(vs, k))
		}
	}
	for _, v := range vs {
		if v.Key == "etcd.endpoints" && v.Source != "default" && !reflect.DeepEqual(SplitList(v.Value), file.Etcd.Endpoints) {
			t.Fatalf("endpoints %q of the file are in force as %q", file.Etcd.Endpoints, SplitList(v.Value))
		}
	}
}

// normal is f with an empty endpoint list as nil (YAML writes both alike).
func normal(f *File) File {
	c := *f
	if len(c.Etcd.Endpoints) == 0 {
		c.Etcd.Endpoints = nil
	}
	return c
}
