package testutil

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// ExecLimit bounds every Exec. It only stops a tool that would hang.
const ExecLimit = 3 * time.Minute

// Exec runs the command name with args and returns its combined output,
// failing t with that output when it fails or runs past ExecLimit. It may
// be called from a cleanup (it does not use t.Context, which is done by
// then).
func Exec(t testing.TB, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ExecLimit)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
