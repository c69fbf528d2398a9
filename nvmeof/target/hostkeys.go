package target

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/nvstripe/nvstripe/nvmeof/auth"
)

// ReadHostKeys reads a host-keys file (`target serve --host-keys`): one
// host per line, "HOSTNQN SECRET [CTRL-SECRET]" with DHHC-1 secrets; blank
// lines and #-comments are ignored. Malformed lines are ErrSpec. The file
// holds secrets: it should be readable by root only.
func ReadHostKeys(path string) ([]HostKey, error) {
	var keys []HostKey
	err := readKeyLines(path, "host keys", func(fs []string) error {
		k, err := parseHostKey(fs)
		if err != nil {
			return err
		}
		keys = append(keys, k)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// readKeyLines reads a keys file (what names it in errors): it calls line
// with the fields of each line that is not blank once its #-comment is
// cut. An error line returns is ErrSpec, with the file and line number.
func readKeyLines(path, what string, line func(fields []string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		fs := strings.Fields(text)
		if len(fs) == 0 {
			continue
		}
		if err := line(fs); err != nil {
			return fmt.Errorf("%w: %s %s line %d: %w", ErrSpec, what, path, n, err)
		}
	}
	return sc.Err()
}

// parseHostKey makes a HostKey of one line's fields.
func parseHostKey(fs []string) (HostKey, error) {
	if len(fs) > 3 || len(fs) < 2 {
		return HostKey{}, fmt.Errorf("want HOSTNQN SECRET [CTRL-SECRET]")
	}
	k := HostKey{HostNQN: fs[0], Secret: fs[1]}
	if len(fs) == 3 {
		k.CtrlSecret = fs[2]
	}
	for _, s := range fs[1:] {
		if _, err := auth.ParseSecret(s); err != nil {
			return HostKey{}, err
		}
	}
	return k, nil
}
