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
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("host keys: %w", err)
	}
	defer f.Close()
	var keys []HostKey
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fs := strings.Fields(line)
		if len(fs) == 0 {
			continue
		}
		k, err := parseHostKey(fs)
		if err != nil {
			return nil, fmt.Errorf("%w: host keys %s line %d: %w", ErrSpec, path, n, err)
		}
		keys = append(keys, k)
	}
	return keys, sc.Err()
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
