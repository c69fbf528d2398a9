// Package buildinfo says which nvstripe this binary is: module version,
// VCS revision and time, Go toolchain and platform, from the build
// information the Go linker embeds.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info is what `nvstripe version` prints.
type Info struct {
	Version    string `json:"version"`               // module version, "(devel)" for a local build
	Commit     string `json:"commit,omitempty"`      // VCS revision, when stamped
	CommitTime string `json:"commit_time,omitempty"` // VCS commit time, RFC 3339
	Modified   bool   `json:"modified,omitempty"`    // built from a dirty tree
	Go         string `json:"go"`                    // Go toolchain version
	Platform   string `json:"platform"`              // GOOS/GOARCH
}

// Read collects Info from the binary's build information.
func Read() Info {
	v := Info{Version: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
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
func (v Info) String() string {
	s := "nvstripe " + v.Version
	if v.Commit != "" {
		s += " commit " + v.Commit
		if v.Modified {
			s += " (modified)"
		}
	}
	return s + " " + v.Go + " " + v.Platform
}
