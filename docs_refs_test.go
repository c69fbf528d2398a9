package nvstripe_test

import (
	"errors"
	"fmt"
	"go/ast"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docFile is one markdown file of the repository's documentation.
type docFile struct {
	path string // slash path relative to the module root
	text string
}

// loadDocs reads README.md and docs/*.md.
func loadDocs(t *testing.T) []docFile {
	t.Helper()
	names, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	names = append([]string{"README.md"}, names...)
	var out []docFile
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatalf("reading the docs: %v (the test must run from the module root)", err)
		}
		out = append(out, docFile{path: filepath.ToSlash(n), text: string(b)})
	}
	return out
}

// trackerRef matches a reference to an item of a tracker that readers of
// the repository do not have: a numbered one (written with a number, "#"
// and a number, or the letter N), "the" one, or one opening a parenthesis.
var trackerRef = regexp.MustCompile(`(?i:\bissue\s+#?\s*\d+)|(?i:\bissues\s+#?\d+\s*(,|and\b|&))|\b[Ii]ssues?\s+N\b|(?i:\bthe\s+issue\b)|(?i:\(issue\b)`)

const trackerHint = "readers of the repository have no tracker: say what the item was about in plain words (the behaviour, the scenario, the bound)"

// checkTrackerText returns the tracker references in text, which starts
// at line first of file name.
func checkTrackerText(name string, first int, text string) []string {
	var out []string
	for i, line := range strings.Split(text, "\n") {
		for _, m := range trackerRef.FindAllString(line, -1) {
			out = append(out, fmt.Sprintf("%s:%d: %q refers to a tracker item: %s", name, first+i, m, trackerHint))
		}
	}
	return out
}

// checkTrackerComments returns the tracker references in g's comments.
func checkTrackerComments(g goFile) []string {
	var out []string
	for _, cg := range g.f.Comments {
		for _, c := range cg.List {
			out = append(out, checkTrackerText(g.path, g.fset.Position(c.Pos()).Line, c.Text)...)
		}
	}
	return out
}

// TestTrackerReferences: no Go comment, doc, README or other text file
// (loadTexts) refers to tracker items (trackerRef: the word followed by a number or N, after "the", or
// opening a parenthesis). Test inputs under testdata are not read; string
// literals (such as the cases of TestChecksCatch) are not comments.
func TestTrackerReferences(t *testing.T) {
	var v []string
	for _, g := range loadModule(t) {
		v = append(v, checkTrackerComments(g)...)
	}
	for _, d := range loadTexts(t) {
		v = append(v, checkTrackerText(d.path, 1, d.text)...)
	}
	report(t, v)
}

// loadTexts reads the repository's other text files people read: markdown,
// .proto, shell scripts, YAML, Makefile and .ci/run (testdata, hidden
// folders and nested modules skipped as for Go files).
func loadTexts(t *testing.T) []docFile {
	t.Helper()
	names := []string{".ci/run"}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return skipDir(p, d)
		}
		switch filepath.Ext(p) {
		case ".md", ".proto", ".sh", ".yaml", ".yml":
			names = append(names, p)
		default:
			if d.Name() == "Makefile" {
				names = append(names, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking the module: %v", err)
	}
	var out []docFile
	for _, n := range names {
		b, err := os.ReadFile(n)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, docFile{path: filepath.ToSlash(n), text: string(b)})
	}
	return out
}

// docRef matches what a markdown file may name a file by: a backticked
// span or a link target.
var docRef = regexp.MustCompile("`([^`\n]+)`|\\]\\(([^)\\s#]+)(?:#[^)]*)?\\)")

// linkTarget matches the target part of a markdown link.
var linkTarget = regexp.MustCompile(`\]\([^)]*\)`)

// repoPathLike matches a relative path: names of letters, digits, '.', '_'
// and '-' joined by slashes (a trailing slash for a folder).
var repoPathLike = regexp.MustCompile(`^[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*/?$`)

// goIdentifier matches a Go name qualified by its package's path
// (`health/pool.Spec`), not a file.
var goIdentifier = regexp.MustCompile(`\.[A-Z][A-Za-z0-9_]*$`)

// checkDocPaths returns the places where doc d names a path outside the
// repository or a file of the repository that does not exist. A backticked
// path counts when its first name is a file or folder at the module root
// (`meta/keys.go`, `Makefile`); a link target is relative to d's folder.
// exists answers for slash paths relative to the module root.
func checkDocPaths(d docFile, exists func(string) bool) []string {
	var out []string
	for i, line := range strings.Split(d.text, "\n") {
		at := fmt.Sprintf("%s:%d", d.path, i+1)
		m := outsidePath.FindString(line)
		if m == "" {
			m = foreignNote(linkTarget.ReplaceAllString(line, "]"), exists) // targets are checked below
		}
		if m != "" {
			out = append(out, fmt.Sprintf("%s: names %q, outside the repository: point at a file in the repository, or say it here", at, m))
		}
		for _, m := range docRef.FindAllStringSubmatch(line, -1) {
			p, link := m[1], m[2] != ""
			if link {
				p = m[2]
			}
			if !repoPathLike.MatchString(p) || strings.Contains(p, "..") || goIdentifier.MatchString(p) {
				continue
			}
			if link {
				if strings.Contains(p, "://") {
					continue
				}
				p = path.Join(path.Dir(d.path), p)
			} else if first, _, _ := strings.Cut(p, "/"); !exists(first) {
				continue // not a path of ours (a package pattern, a system path, a word)
			}
			if !exists(strings.TrimSuffix(p, "/")) {
				out = append(out, fmt.Sprintf("%s: names %q, which is not in the repository: correct the path, or drop it", at, p))
			}
		}
	}
	return out
}

// existsInRepo reports whether slash path p exists under the module root.
func existsInRepo(p string) bool {
	_, err := os.Stat(filepath.FromSlash(p))
	return err == nil && p != "" && !strings.HasPrefix(p, "/")
}

// TestChecksDocPaths feeds checkDocPaths a doc naming good and bad paths.
func TestChecksDocPaths(t *testing.T) {
	have := map[string]bool{"meta": true, "meta/keys.go": true, "docs/b.md": true, "Makefile": true}
	d := docFile{path: "docs/a.md", text: "# A\n" +
		"`meta/keys.go`, `meta/nokeys.go`, [b](b.md), [c](c.md#x), [w](https://example.com/x)\n" +
		"`x/sync`, `/etc/nvme/hostnqn`, `health/pool.Spec`, `meta/...`, `Makefile`, `ec`\n" +
		"the harness in ../shared/vm\n" +
		"measured in toolchain.md\n"}
	got := checkDocPaths(d, func(p string) bool { return have[p] })
	want := []string{`docs/a.md:2: names "meta/nokeys.go"`, `docs/a.md:2: names "docs/c.md"`, `docs/a.md:4: names "../"`, `docs/a.md:5: names "toolchain.md"`}
	if len(got) != len(want) {
		t.Fatalf("got %d violations, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("violation %d = %q, want it to mention %q", i, got[i], w)
		}
	}
	if v := checkTrackerText("README.md", 1, "Fixed (issue 9).\nThe reader issues reads.\n"); len(v) != 1 || !strings.Contains(v[0], "README.md:1:") {
		t.Errorf("checkTrackerText = %q, want one violation on line 1", v)
	}
}

// goNames are the names the module declares: per package name (the
// package clause) its top-level names, and every declared name at all
// (functions, methods, types, constants, variables, fields).
type goNames struct {
	top map[string]map[string]bool
	any map[string]bool
}

// collectNames gathers the declared names of files.
func collectNames(files []goFile) goNames {
	n := goNames{top: map[string]map[string]bool{}, any: map[string]bool{}}
	for _, g := range files {
		pkg := g.f.Name.Name
		if n.top[pkg] == nil {
			n.top[pkg] = map[string]bool{}
		}
		for name := range topLevelNames(g.f) {
			n.top[pkg][name] = true
		}
		ast.Inspect(g.f, func(node ast.Node) bool {
			var ids []*ast.Ident
			switch d := node.(type) {
			case *ast.FuncDecl:
				ids = []*ast.Ident{d.Name}
			case *ast.TypeSpec:
				ids = []*ast.Ident{d.Name}
			case *ast.ValueSpec:
				ids = d.Names
			case *ast.Field:
				ids = d.Names
			}
			for _, id := range ids {
				n.any[id.Name] = true
			}
			return true
		})
	}
	return n
}

// topLevelNames returns the package-level functions, types, constants and
// variables of f.
func topLevelNames(f *ast.File) map[string]bool {
	out := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				out[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					out[s.Name.Name] = true
				case *ast.ValueSpec:
					for _, id := range s.Names {
						out[id.Name] = true
					}
				}
			}
		}
	}
	return out
}

// goRef matches a backticked Go name: an optional package name, then
// dotted exported names (`Decide`, `meta.Store.SetPathState`,
// `Volume.MoveSlot()`).
var goRef = regexp.MustCompile(`^(?:([a-z][a-z0-9]*)\.)?([A-Z][A-Za-z0-9_]*(?:\.[A-Z][A-Za-z0-9_]*)*)(?:\(\))?$`)

// checkDocNames returns the Go names doc d cites in backticks that the
// module does not declare. A name qualified by a package that is not ours
// (`time.Now`) is not checked, nor an all-capitals word (`ENOSPC`, `ANA`).
func checkDocNames(d docFile, n goNames) []string {
	var out []string
	for i, line := range strings.Split(d.text, "\n") {
		for _, m := range backticked.FindAllStringSubmatch(line, -1) {
			ref := goRef.FindStringSubmatch(m[1])
			if ref == nil || ref[1] != "" && n.top[ref[1]] == nil {
				continue
			}
			for j, part := range strings.Split(ref[2], ".") {
				known := n.any[part]
				if j == 0 && ref[1] != "" {
					known = n.top[ref[1]][part]
				}
				if !known && strings.ToUpper(part) != part {
					out = append(out, fmt.Sprintf("%s:%d: `%s`: the module declares no %s%s: renamed or removed? name what the code has, or drop it",
						d.path, i+1, m[1], part, map[bool]string{true: " in package " + ref[1], false: ""}[j == 0 && ref[1] != ""]))
					break
				}
			}
		}
	}
	return out
}

// TestDocNames: every Go name that README.md and docs/*.md cite in
// backticks is declared in the module, so that a rename or a removal
// updates the docs too.
func TestDocNames(t *testing.T) {
	n := collectNames(loadModule(t))
	var v []string
	for _, d := range loadDocs(t) {
		v = append(v, checkDocNames(d, n)...)
	}
	report(t, v)
}

// TestChecksDocNames feeds checkDocNames names that exist and that do not.
func TestChecksDocNames(t *testing.T) {
	n := collectNames([]goFile{
		parseSource(t, "agent", "a.go", "package agent\ntype Agent struct{}\nfunc (a *Agent) WaitLost() {}\nconst ErrDetached = 1"),
		parseSource(t, "agent/api", "b.go", "package api\ntype Mapping struct{ Volume string }"),
	})
	d := docFile{path: "docs/a.md", text: "`Agent.WaitLost`, `agent.ErrDetached`, `api.Mapping.Volume`, `time.Now`, `ENOSPC`, `--flag`\n" +
		"`WaitFenced`, `api.WriteMappings`, `Agent.WaitFenced()`, `api.WaitLost`\n"}
	got := checkDocNames(d, n)
	want := []string{"docs/a.md:2: `WaitFenced`", "docs/a.md:2: `api.WriteMappings`: the module declares no WriteMappings in package api",
		"docs/a.md:2: `Agent.WaitFenced()`", "docs/a.md:2: `api.WaitLost`"}
	if len(got) != len(want) {
		t.Fatalf("got %d violations, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("violation %d = %q, want it to mention %q", i, got[i], w)
		}
	}
}
