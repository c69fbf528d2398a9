package target

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nvstripe/nvstripe/internal/units"
)

// ErrSpec marks a malformed NAME:SIZE or NAME:GROUP specification (a
// command-line mistake).
var ErrSpec = errors.New("bad namespace specification")

// ParseFileNamespaces turns NAME:SIZE specifications (SIZE as units.ParseSize
// reads it) and NAME:GROUP ANA group assignments into file namespaces, in
// the order of specs.
func ParseFileNamespaces(specs, anaGroups []string) ([]FileNamespace, error) {
	groups := map[string]uint32{}
	for _, s := range anaGroups {
		name, g, ok := strings.Cut(s, ":")
		n, err := strconv.ParseUint(g, 10, 32)
		if !ok || err != nil || n == 0 {
			return nil, fmt.Errorf("%w: ANA group %q: want NAME:GROUP with GROUP >= 1", ErrSpec, s)
		}
		groups[name] = uint32(n)
	}
	var out []FileNamespace
	for _, spec := range specs {
		name, sz, ok := strings.Cut(spec, ":")
		if !ok || name == "" || strings.ContainsAny(name, "/\\") {
			return nil, fmt.Errorf("%w: namespace %q: want NAME:SIZE", ErrSpec, spec)
		}
		size, err := units.ParseSize(sz)
		if err == nil && size <= 0 {
			err = errors.New("the size must be positive")
		}
		if err != nil {
			return nil, fmt.Errorf("%w: namespace %q: %w", ErrSpec, spec, err)
		}
		out = append(out, FileNamespace{Name: name, Size: size, ANAGroup: groups[name]})
		delete(groups, name)
	}
	for name := range groups {
		return nil, fmt.Errorf("%w: ANA group names unknown namespace %q", ErrSpec, name)
	}
	return out, nil
}

// FileSpec is a one-subsystem target over namespace files as an operator
// names it (the flags of `nvstripe target serve`).
type FileSpec struct {
	Dir        string    // directory of the files NAME.img
	NQN        string    // subsystem NQN
	Listen     []string  // listener addresses
	Namespaces []string  // NAME:SIZE
	ANAGroups  []string  // NAME:GROUP
	AllowHosts []string  // host NQNs, or "any"
	HostKeys   []HostKey // hosts that must authenticate (DH-HMAC-CHAP); each is allowed too
	BlockSize  int
}

// Config checks the spec and returns the target's configuration with the
// namespace files open (CloseNamespaces closes them). Mistakes are ErrSpec.
func (f FileSpec) Config() (Config, error) {
	var cfg Config
	if f.Dir == "" || f.NQN == "" || len(f.Namespaces) == 0 {
		return cfg, fmt.Errorf("%w: a directory, a subsystem NQN and at least one namespace are required", ErrSpec)
	}
	if len(f.AllowHosts) == 0 && len(f.HostKeys) == 0 {
		return cfg, fmt.Errorf("%w: no host is allowed: --allow-host NQN admits a host that claims NQN ('any': every host, for demos), "+
			"--host-keys FILE the hosts it lists once they authenticate (DH-HMAC-CHAP)", ErrSpec)
	}
	sub := SubsystemConfig{NQN: f.NQN, HostKeys: f.HostKeys}
	for _, h := range f.AllowHosts {
		if h == "any" {
			sub.AllowAnyHost = true
		} else {
			sub.AllowedHosts = append(sub.AllowedHosts, h)
		}
	}
	nss, err := ParseFileNamespaces(f.Namespaces, f.ANAGroups)
	if err != nil {
		return cfg, err
	}
	if sub.Namespaces, err = OpenFileNamespaces(f.Dir, f.BlockSize, nss); err != nil {
		return cfg, err
	}
	cfg.Subsystems = []SubsystemConfig{sub}
	for _, a := range f.Listen {
		if a = strings.TrimSpace(a); a != "" {
			cfg.Listeners = append(cfg.Listeners, ListenerConfig{Address: a})
		}
	}
	return cfg, nil
}

// Summary describes what a started target serves, for its operator.
type Summary struct {
	Listeners  []string           `json:"listeners"`
	Subsystems []SubsystemSummary `json:"subsystems"`
}

// SubsystemSummary is one subsystem of a Summary.
type SubsystemSummary struct {
	NQN        string             `json:"nqn"`
	Namespaces []NamespaceSummary `json:"namespaces"`
}

// NamespaceSummary is one namespace of a SubsystemSummary.
type NamespaceSummary struct {
	NSID     uint32 `json:"nsid"`
	Name     string `json:"name"`
	Size     int64  `json:"size"` // bytes
	UUID     string `json:"uuid"` // hex
	ANAGroup uint32 `json:"ana_group"`
}

// String is the summary for people: each subsystem, listener and
// namespace on a line.
func (s Summary) String() string {
	var b strings.Builder
	for _, ss := range s.Subsystems {
		fmt.Fprintf(&b, "subsystem %s\n", ss.NQN)
	}
	for i, a := range s.Listeners {
		fmt.Fprintf(&b, "listener %d: %s\n", i, a)
	}
	for _, ss := range s.Subsystems {
		for _, ns := range ss.Namespaces {
			fmt.Fprintf(&b, "ns %d: %s size %s uuid %s ana-group %d\n", ns.NSID, ns.Name, units.FormatSize(ns.Size), ns.UUID, ns.ANAGroup)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Summary lists the target's listeners, subsystems and namespaces.
func (t *Target) Summary() Summary {
	out := Summary{Listeners: t.Addrs()}
	for _, s := range t.cfg.Subsystems {
		ss := SubsystemSummary{NQN: s.NQN}
		for _, ns := range s.Namespaces {
			u, _ := DeriveNamespaceIDs(s.NQN, ns.NSID, ns.Name)
			ss.Namespaces = append(ss.Namespaces, NamespaceSummary{NSID: ns.NSID, Name: ns.Name,
				Size: ns.Device.Size(), UUID: fmt.Sprintf("%x", u), ANAGroup: max(ns.ANAGroup, 1)})
		}
		out.Subsystems = append(out.Subsystems, ss)
	}
	return out
}
