package nvstripe_test

import (
	"fmt"
	"go/ast"
	"go/token"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// schemaPrefixesInCode returns the first names of the etcd keys package
// meta builds: each string literal added to a keys value's root
// (k.root + "hosts/" gives "hosts"), with where it is.
func schemaPrefixesInCode(files []goFile) map[string]string {
	out := map[string]string{}
	for _, g := range files {
		if g.pkg != "meta" || g.test {
			continue
		}
		ast.Inspect(g.f, func(n ast.Node) bool {
			b, ok := n.(*ast.BinaryExpr)
			if !ok || b.Op != token.ADD {
				return true
			}
			sel, ok := b.X.(*ast.SelectorExpr)
			lit, isLit := b.Y.(*ast.BasicLit)
			if !ok || sel.Sel.Name != "root" || !isLit || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil {
				first, _, _ := strings.Cut(s, "/")
				out[first] = g.pos(lit.Pos())
			}
			return true
		})
	}
	return out
}

// schemaPrefixesInDocs returns the first names of the keys listed in the
// table under heading in the markdown text, with their line numbers.
func schemaPrefixesInDocs(text, heading string) (map[string]int, error) {
	lines := strings.Split(text, "\n")
	start := slices.Index(lines, heading)
	if start < 0 {
		return nil, fmt.Errorf("no line %q", heading)
	}
	out := map[string]int{}
	inTable := false
	for i := start + 1; i < len(lines) && !strings.HasPrefix(lines[i], "## "); i++ {
		if !strings.HasPrefix(lines[i], "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		m := backticked.FindStringSubmatch(strings.Split(lines[i], "|")[1])
		if m == nil {
			continue // the header and the separator
		}
		first, _, _ := strings.Cut(m[1], "/")
		out[first] = i + 1
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no table of keys under %q", heading)
	}
	return out, nil
}

// TestEtcdSchemaDocs: the schema table of docs/architecture.md lists every
// key prefix package meta writes, and no other.
func TestEtcdSchemaDocs(t *testing.T) {
	const heading = "## The etcd schema"
	b, err := os.ReadFile(docsArchitecture)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := schemaPrefixesInDocs(string(b), heading)
	if err != nil {
		t.Fatalf("%s: %v", docsArchitecture, err)
	}
	code := schemaPrefixesInCode(loadModule(t))
	if len(code) < 5 {
		t.Fatalf("found only %d key prefixes in package meta (%v): has the keys type changed? adapt schemaPrefixesInCode", len(code), code)
	}
	for _, p := range slices.Sorted(maps.Keys(code)) {
		if _, ok := docs[p]; !ok {
			t.Errorf("%s builds keys under %q, which the table under %q in %s lacks: add a row for it", code[p], p+"/", heading, docsArchitecture)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(docs)) {
		if _, ok := code[p]; !ok {
			t.Errorf("%s:%d: the schema lists %q, which package meta builds no key under: correct or remove the row", docsArchitecture, docs[p], p)
		}
	}
}
