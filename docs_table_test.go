package nvstripe_test

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The import table of docs/architecture.md is importRules written out for
// readers. TestImportTableMatchesDocs keeps the two equal: the same packages
// and, per package, the same patterns.
//
// Format of the markdown table (the section "The import table"):
//
//	| package | may import (ours) | but not (ours) | third-party | standard library |
//
// Every cell lists backticked patterns separated by commas ("—" or nothing
// for none): `x` one package, `x/...` a folder and everything below it, `*`
// anything. The package cell may name several packages that share a row, and
// "(module root)" or "(default)" for those two rows. The standard-library
// cell lists what the package may NOT import, plus two words: "pure" (no
// clock and no global randomness: purePackages) and "no IO" (no os, net,
// syscall or math/rand v1: pureStd).

const (
	docsArchitecture = "docs/architecture.md"
	docsTableHeading = "## The import table"
	docsTableHeader  = "| package | may import (ours) | but not (ours) | third-party | standard library |"
	docsRootLabel    = "(module root)"
	docsDefaultLabel = "(default)"
	docsPureWord     = "pure"
	docsNoIOWord     = "no IO"
)

// tableRow is one package's row: importRules' or the docs' view of it.
type tableRow struct {
	ours, not, third, std []string // sorted patterns; std: forbidden ones
	pure                  bool     // in purePackages
}

// docsRow is a tableRow read from the markdown, with its line number.
type docsRow struct {
	tableRow
	line int
}

// rowsFromRules returns importRules and purePackages as table rows.
func rowsFromRules() map[string]tableRow {
	rows := map[string]tableRow{}
	for key, r := range importRules() {
		rows[key] = tableRow{
			ours: sorted(r.ours), not: sorted(r.not), third: sorted(r.third),
			std: sorted(slices.Collect(maps.Keys(r.std))), pure: slices.Contains(purePackages(), key),
		}
	}
	return rows
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// readDocsTable parses the import table of the markdown file at path.
func readDocsTable(path string) (map[string]docsRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return parseDocsTable(path, lines)
}

// parseDocsTable finds the table after docsTableHeading in lines and parses
// its rows.
func parseDocsTable(path string, lines []string) (map[string]docsRow, error) {
	start := slices.Index(lines, docsTableHeading)
	if start < 0 {
		return nil, fmt.Errorf("%s: no line %q: the import table must sit under that heading", path, docsTableHeading)
	}
	header := slices.IndexFunc(lines[start:], func(l string) bool { return strings.HasPrefix(l, "|") })
	if header < 0 || strings.Join(strings.Fields(lines[start+header]), " ") != docsTableHeader {
		return nil, fmt.Errorf("%s: the table under %q must start with the header %q", path, docsTableHeading, docsTableHeader)
	}
	rows := map[string]docsRow{}
	var errs []string
	for i := start + header + 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		pkgs, row, err := parseDocsRow(lines[i])
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s:%d: %v", path, i+1, err))
			continue
		}
		for _, p := range pkgs {
			if prev, dup := rows[p]; dup {
				errs = append(errs, fmt.Sprintf("%s:%d: package %s already has a row at line %d", path, i+1, docsLabel(p), prev.line))
			}
			rows[p] = docsRow{tableRow: row, line: i + 1}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return rows, nil
}

// backticked matches one `pattern` in a cell.
var backticked = regexp.MustCompile("`([^`]*)`")

// parseDocsRow parses one table line into the packages it covers and their row.
func parseDocsRow(line string) ([]string, tableRow, error) {
	cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "|"), "|"), "|")
	if len(cells) != 5 {
		return nil, tableRow{}, fmt.Errorf("%d cells, want 5 (%s)", len(cells), docsTableHeader)
	}
	allowed := [5][]string{0: {docsRootLabel, docsDefaultLabel}, 4: {docsPureWord, docsNoIOWord}}
	var patterns, words [5][]string
	for i, c := range cells {
		var err error
		if patterns[i], words[i], err = parseCell(c, allowed[i]...); err != nil {
			return nil, tableRow{}, err
		}
	}
	pkgs := patterns[0]
	for _, w := range words[0] {
		pkgs = append(pkgs, map[string]string{docsRootLabel: "", docsDefaultLabel: defaultRuleMarker}[w])
	}
	if len(pkgs) == 0 {
		return nil, tableRow{}, fmt.Errorf("the package cell names no package")
	}
	row := tableRow{ours: sorted(patterns[1]), not: sorted(patterns[2]), third: sorted(patterns[3]), std: patterns[4]}
	for _, w := range words[4] {
		switch w {
		case docsPureWord:
			row.pure = true
		case docsNoIOWord:
			row.std = append(row.std, slices.Collect(maps.Keys(pureStd()))...)
		}
	}
	row.std = sorted(row.std)
	return pkgs, row, nil
}

// parseCell returns the backticked patterns of a cell and the allowed bare
// words it has; anything else in it is an error.
func parseCell(cell string, allowed ...string) (patterns, words []string, err error) {
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		patterns = append(patterns, m[1])
	}
	rest := backticked.ReplaceAllString(cell, "")
	for _, w := range allowed {
		if strings.Contains(rest, w) {
			words = append(words, w)
			rest = strings.ReplaceAll(rest, w, "")
		}
	}
	if junk := strings.Trim(rest, " ,—-"); junk != "" {
		return nil, nil, fmt.Errorf("cell %q: unexpected %q: list backticked patterns separated by commas%s",
			strings.TrimSpace(cell), junk, wordsHint(allowed))
	}
	return patterns, words, nil
}

func wordsHint(words []string) string {
	if len(words) == 0 {
		return ""
	}
	return fmt.Sprintf(" (and the words %q)", words)
}

func docsLabel(pkg string) string {
	switch pkg {
	case "":
		return docsRootLabel
	case defaultRuleMarker:
		return docsDefaultLabel
	}
	return "`" + pkg + "`"
}

// markdownRow renders pkg's row as it belongs in the docs table.
func markdownRow(pkg string, r tableRow) string {
	std := r.std
	var words []string
	if r.pure {
		words = append(words, docsPureWord)
	}
	noIO := sorted(slices.Collect(maps.Keys(pureStd())))
	if len(std) >= len(noIO) && !slices.ContainsFunc(noIO, func(p string) bool { return !slices.Contains(std, p) }) {
		words = append(words, docsNoIOWord)
		std = slices.DeleteFunc(slices.Clone(std), func(p string) bool { return slices.Contains(noIO, p) })
	}
	if len(std) > 0 {
		words = append(words, cellOf(std))
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s |", docsLabel(pkg), cellOf(r.ours), cellOf(r.not), cellOf(r.third), strings.Join(words, ", "))
}

func cellOf(patterns []string) string {
	if len(patterns) == 0 {
		return ""
	}
	return "`" + strings.Join(patterns, "`, `") + "`"
}

// diffRows compares the docs' rows with importRules' and returns one
// message per package that differs, saying how to fix it.
func diffRows(path string, want map[string]tableRow, got map[string]docsRow) []string {
	var out []string
	for _, pkg := range slices.Sorted(maps.Keys(want)) {
		w := want[pkg]
		g, ok := got[pkg]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: the import table has no row for %s, which importRules in layering_test.go has: add this row to the table (section %q):\n\t%s",
				path, docsLabel(pkg), strings.TrimPrefix(docsTableHeading, "## "), markdownRow(pkg, w)))
		case !rowsEqual(w, g.tableRow):
			out = append(out, fmt.Sprintf("%s:%d: the row for %s differs from importRules in layering_test.go (%s); with importRules as it is, the row reads:\n\t%s",
				path, g.line, docsLabel(pkg), rowDiff(w, g.tableRow), markdownRow(pkg, w)))
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[pkg]; !ok {
			out = append(out, fmt.Sprintf("%s:%d: the import table lists %s, which has no row in importRules (layering_test.go): add the row to importRules, or remove the package from the table",
				path, got[pkg].line, docsLabel(pkg)))
		}
	}
	return out
}

func rowsEqual(a, b tableRow) bool {
	return slices.Equal(a.ours, b.ours) && slices.Equal(a.not, b.not) && slices.Equal(a.third, b.third) &&
		slices.Equal(a.std, b.std) && a.pure == b.pure
}

// rowDiff names the columns that differ, with what each side has.
func rowDiff(want, got tableRow) string {
	var parts []string
	for _, c := range []struct {
		name      string
		want, got []string
	}{{"may import (ours)", want.ours, got.ours}, {"but not (ours)", want.not, got.not},
		{"third-party", want.third, got.third}, {"standard library (forbidden)", want.std, got.std}} {
		if !slices.Equal(c.want, c.got) {
			parts = append(parts, fmt.Sprintf("%s: importRules %q, docs %q", c.name, c.want, c.got))
		}
	}
	if want.pure != got.pure {
		parts = append(parts, fmt.Sprintf("pure (in purePackages): importRules %v, docs %v", want.pure, got.pure))
	}
	return strings.Join(parts, "; ")
}

// TestImportTableMatchesDocs: docs/architecture.md's import table equals
// importRules, and every package of the module has a row of its own (the
// default row is a safety net, not a place to live).
func TestImportTableMatchesDocs(t *testing.T) {
	want := rowsFromRules()
	got, err := readDocsTable(docsArchitecture)
	if err != nil {
		var rows []string
		for _, pkg := range slices.Sorted(maps.Keys(want)) {
			rows = append(rows, markdownRow(pkg, want[pkg]))
		}
		t.Fatalf("%v\n\nThe table starts with %s; with importRules as it is, its rows read (one package a row; rows that agree may be merged):\n%s",
			err, docsTableHeader, strings.Join(rows, "\n"))
	}
	report(t, diffRows(docsArchitecture, want, got))
	rules := importRules()
	seen := map[string]bool{}
	for _, g := range loadModule(t) {
		if _, own := ruleFor(rules, g.pkg); !own && !seen[g.pkg] {
			seen[g.pkg] = true
			t.Errorf("package %s has no row in the import table: add one to importRules in layering_test.go and the same row to %s's table (the failure then prints it)",
				displayPkg(g.pkg), docsArchitecture)
		}
	}
}

// TestChecksDocsTable feeds the table parser and comparison rows that
// break them, so that a check that stops working fails here.
func TestChecksDocsTable(t *testing.T) {
	want := map[string]tableRow{
		"a":               {ours: []string{"blockdev"}, third: []string{"x.org/y/..."}},
		"p":               {std: sorted(append(slices.Collect(maps.Keys(pureStd())), "time")), pure: true},
		"":                {},
		defaultRuleMarker: {ours: []string{"blockdev"}},
	}
	doc := []string{"# x", docsTableHeading, "", docsTableHeader, "| --- | --- | --- | --- | --- |",
		"| `a` | `blockdev` | | `x.org/y/...` | |",
		"| `p` | — | — | — | pure, no IO, `time` |",
		"| (module root) | | | | |",
		"| (default) | `blockdev` | | | |",
		"", "after"}
	got, err := parseDocsTable("t.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffRows("t.md", want, got); len(d) != 0 {
		t.Fatalf("a matching table differs:\n%s", strings.Join(d, "\n"))
	}
	for pkg, r := range want {
		pkgs, back, err := parseDocsRow(markdownRow(pkg, r))
		if err != nil || len(pkgs) != 1 || !rowsEqual(back, r) {
			t.Errorf("markdownRow(%q) = %q does not parse back: %v %q %+v", pkg, markdownRow(pkg, r), err, pkgs, back)
		}
	}

	drift := slices.Clone(doc)
	drift[5] = "| `a` | `blockdev`, `ec` | | `x.org/y/...` | |" // an extra import
	drift[6] = "| `q` | | | | pure, no IO, `time` |"            // p renamed to q
	got, err = parseDocsTable("t.md", drift)
	if err != nil {
		t.Fatal(err)
	}
	d := diffRows("t.md", want, got)
	for i, w := range []string{"t.md:6: the row for `a` differs", "no row for `p`", "lists `q`, which has no row"} {
		if i >= len(d) || !strings.Contains(d[i], w) {
			t.Errorf("diff %d = %q, want it to mention %q (all: %q)", i, d, w, d)
		}
	}

	for _, bad := range []string{"| `a` | blockdev | | | |", "| `a` | | | |", "| | | | | |", "| `a` | | | | pure and simple |"} {
		broken := slices.Clone(doc)
		broken[5] = bad
		if _, err := parseDocsTable("t.md", broken); err == nil || !strings.Contains(err.Error(), "t.md:6:") {
			t.Errorf("row %q: err = %v, want an error at t.md:6", bad, err)
		}
	}
	if _, err := parseDocsTable("t.md", doc[2:]); err == nil {
		t.Error("a table without its heading parsed")
	}
}
