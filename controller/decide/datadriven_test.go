package decide

import (
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// Scenario scripts are github.com/cockroachdb/datadriven files:
//
//	# comments and blank lines between cases are kept
//	command pos1 pos2 key=value key2=value2
//	----
//	expected output, one or more lines, up to a blank line or the end
//
// Run with -rewrite to replace every expected block with what the code
// printed now; review the change with git diff.

// command is one script line as the scenario handlers read it.
type command struct {
	pos  string // file:line
	name string
	args []string          // positional arguments after the name
	kv   map[string]string // key=value arguments
	line string
}

func (c command) has(key string) bool { _, ok := c.kv[key]; return ok }

// commandOf flattens a datadriven directive: arguments without a value are
// positional, key=(a,b) values are joined with commas.
func commandOf(d *datadriven.TestData) command {
	c := command{pos: d.Pos, name: d.Cmd, kv: map[string]string{}, line: d.Cmd}
	for _, a := range d.CmdArgs {
		c.line += " " + a.String()
		if len(a.Vals) == 0 {
			c.args = append(c.args, a.Key)
			continue
		}
		c.kv[a.Key] = strings.Join(a.Vals, ",")
	}
	return c
}

// runScript runs every case of the script at path through do; an empty
// output reads "ok".
func runScript(t *testing.T, path string, do func(command) string) {
	t.Helper()
	datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
		out := strings.TrimRight(do(commandOf(d)), "\n")
		if out == "" {
			out = "ok"
		}
		return out + "\n"
	})
}
