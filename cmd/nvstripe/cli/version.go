package cli

import (
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo is what `nvstripe version` prints.
type versionInfo struct {
	Version    string `json:"version"`               // module version, "(devel)" for a local build
	Commit     string `json:"commit,omitempty"`      // VCS revision, when stamped
	CommitTime string `json:"commit_time,omitempty"` // VCS commit time, RFC 3339
	Modified   bool   `json:"modified,omitempty"`    // built from a dirty tree
	Go         string `json:"go"`                    // Go toolchain version
	Platform   string `json:"platform"`              // GOOS/GOARCH
}

// readVersion collects versionInfo from the binary's build information.
func readVersion() versionInfo {
	v := versionInfo{Version: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the one-line human form.
func (v versionInfo) String() string {
	s := "nvstripe " + v.Version
	if v.Commit != "" {
		s += " commit " + v.Commit
		if v.Modified {
			s += " (modified)"
		}
	}
	return s + " " + v.Go + " " + v.Platform
}

func newVersionCmd(*globals) *cobra.Command {
	c := &cobra.Command{
		Use:         "version",
		Short:       "Print the nvstripe version",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annotationNoSelfTest: "yes"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := readVersion()
			return report(cmd, v, "%s", v)
		},
	}
	return c
}
