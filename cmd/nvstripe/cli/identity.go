package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/nvmeof/identity"
)

// hostIdentityEnv names a directory that replaces /etc/nvme and
// /etc/nvstripe as the home of this node's NVMe host identity (tests,
// containers without /etc).
const hostIdentityEnv = "NVSTRIPE_HOST_IDENTITY_DIR"

// hostNQNUsage is the help of every --host-nqn flag.
const hostNQNUsage = "NVMe host NQN to connect as (default: this node's, see 'nvstripe host-identity')"

// nodeIdentityDirs are where this node's identity lives: /etc/nvme and
// /etc/nvstripe, or $NVSTRIPE_HOST_IDENTITY_DIR alone.
func nodeIdentityDirs() identity.Dirs {
	if dir := os.Getenv(hostIdentityEnv); dir != "" {
		return identity.Dirs{Store: dir}
	}
	return identity.DefaultDirs
}

func nodeIdentity() (identity.Host, error) {
	h, err := identity.Load(nodeIdentityDirs())
	if err != nil {
		return h, fmt.Errorf("this node's host identity (or give --host-nqn): %w", err)
	}
	return h, nil
}

// nodeHostNQN is the --host-nqn flag's value, else this node's NQN.
func nodeHostNQN(flag string) (string, error) {
	if flag != "" {
		if err := identity.CheckNQN(flag); err != nil {
			return "", usageError{fmt.Errorf("--host-nqn: %w", err)}
		}
		return flag, nil
	}
	h, err := nodeIdentity()
	return h.NQN, err
}

func newHostIdentityCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:   "host-identity",
		Short: "Print this node's NVMe host NQN and host ID (made and stored on first use)",
		Long: "The node's host NQN and host ID come from /etc/nvme/hostnqn and /etc/nvme/hostid (nvme-cli's)\n" +
			"when present, else from /etc/nvstripe, where they are generated and stored on first use\n" +
			"($" + hostIdentityEnv + " names another directory). agent, map, ns add, ns discover and\n" +
			"controller run connect as this NQN unless given --host-nqn: allow it on the targets\n" +
			"('target serve --allow-host NQN').",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := nodeIdentity()
			if err != nil {
				return err
			}
			id := identity.FormatUUID(h.ID)
			return report(cmd, map[string]string{"hostnqn": h.NQN, "hostid": id}, "hostnqn %s\nhostid %s", h.NQN, id)
		},
	}
}

// nodeHostNQNSource returns the host NQN that commands connect as when no
// flag, environment variable or config file names one, and where it comes
// from: the first of d's hostnqn files that exists (the order of
// identity.Load), else none yet and where the first connecting command
// will store a generated one. It writes nothing.
func nodeHostNQNSource(d identity.Dirs) (nqn, source string) {
	for _, dir := range []string{d.NVMe, d.Store} {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, identity.NQNFile)
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			err = identity.CheckNQN(strings.TrimSpace(string(b)))
		}
		if err != nil {
			return "", fmt.Sprintf("file %s, unusable: %v", p, err)
		}
		return strings.TrimSpace(string(b)), "file " + p
	}
	return "", fmt.Sprintf("none yet: generated on first use into %s", filepath.Join(d.Store, identity.NQNFile))
}
