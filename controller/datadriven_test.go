package controller

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
)

// A tiny datadriven harness in the style of raft's interaction tests. A
// script is a sequence of cases:
//
//	# comments and blank lines between cases are kept
//	command pos1 pos2 key=value key2=value2
//	----
//	expected output, one or more lines, up to a blank line or the end
//
// Run with -rewrite to replace every expected block with what the code
// printed now; review the change with git diff.

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

// command is one parsed command line.
type command struct {
	pos  string // file:line
	name string
	args []string          // positional arguments after the name
	kv   map[string]string // key=value arguments
	line string
}

func (c command) has(key string) bool { _, ok := c.kv[key]; return ok }

func parseCommand(pos, line string) command {
	f := strings.Fields(line)
	c := command{pos: pos, name: f[0], kv: map[string]string{}, line: line}
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			c.kv[k] = v
		} else {
			c.args = append(c.args, a)
		}
	}
	return c
}

// runScript runs every case of the script at path through do, which
// returns the output; a mismatch fails the test (or is rewritten).
func runScript(t *testing.T, path string, do func(command) string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out = append(out, line)
		if trimmed := strings.TrimSpace(line); trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command %q is not followed by ----", path, i+1, line)
		}
		end := i + 2
		for end < len(lines) && lines[end] != "" {
			end++
		}
		want := strings.Join(lines[i+2:end], "\n")
		got := strings.TrimRight(do(parseCommand(path+":"+strconv.Itoa(i+1), line)), "\n")
		if got == "" {
			got = "ok"
		}
		if got != want && !*rewrite {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, i+1, line, got, want)
		}
		out = append(out, "----", got)
		i = end - 1
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
