package target

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestFileSpec(t *testing.T) {
	dir := t.TempDir()
	good := FileSpec{Dir: dir, NQN: "nqn.test:spec", Listen: []string{"127.0.0.1:0", " "}, Namespaces: []string{"a:1MiB", "b:2MiB"},
		ANAGroups: []string{"b:2"}, AllowHosts: []string{"any"}, BlockSize: 4096}
	for name, mutate := range map[string]func(*FileSpec){
		"no dir":              func(f *FileSpec) { f.Dir = "" },
		"no host":             func(f *FileSpec) { f.AllowHosts = nil },
		"no size":             func(f *FileSpec) { f.Namespaces = []string{"a"} },
		"zero size":           func(f *FileSpec) { f.Namespaces = []string{"a:0"} },
		"path in name":        func(f *FileSpec) { f.Namespaces = []string{"x/y:1MiB"} },
		"bad group":           func(f *FileSpec) { f.ANAGroups = []string{"a:0"} },
		"group of a stranger": func(f *FileSpec) { f.ANAGroups = []string{"c:2"} },
	} {
		f := good
		mutate(&f)
		if _, err := f.Config(); !errors.Is(err, ErrSpec) {
			t.Errorf("%s: %v, want ErrSpec", name, err)
		}
	}
	cfg, err := good.Config()
	if err != nil {
		t.Fatal(err)
	}
	defer CloseNamespaces(cfg.Subsystems[0].Namespaces)
	if len(cfg.Listeners) != 1 || !cfg.Subsystems[0].AllowAnyHost {
		t.Fatalf("config %+v", cfg)
	}
	tg, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	sum := tg.Summary()
	nss := sum.Subsystems[0].Namespaces
	if len(sum.Listeners) != 1 || sum.Listeners[0] == "127.0.0.1:0" || len(nss) != 2 ||
		nss[0].Name != "a" || nss[0].Size != 1<<20 || nss[0].ANAGroup != 1 || nss[1].NSID != 2 || nss[1].ANAGroup != 2 || len(nss[1].UUID) != 32 {
		t.Errorf("summary %+v", sum)
	}
	if txt := sum.String(); !strings.Contains(txt, "subsystem nqn.test:spec\nlistener 0: 127.0.0.1:") || !strings.Contains(txt, "ns 2: b size 2 MiB uuid ") {
		t.Errorf("summary text:\n%s", txt)
	}
}
