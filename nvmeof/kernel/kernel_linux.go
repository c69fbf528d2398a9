package kernel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/nvstripe/nvstripe/blockdev"
)

// nsName matches namespace block devices (nvme0n1) and not the hidden
// per-path ones (nvme0c1n1) or partitions (nvme0n1p1).
var nsName = regexp.MustCompile(`^nvme[0-9]+n[0-9]+$`)

// list scans the sysfs tree of opts (defaults applied).
func list(opts Options) ([]Namespace, error) {
	class := filepath.Join(opts.SysfsRoot, "class", "nvme")
	if _, err := os.Stat(class); err != nil {
		return nil, blockdev.Mark(fmt.Errorf("kernel: %s: %w", class, ErrNoNVMe), blockdev.ErrUnavailable)
	}
	seen := map[string]Namespace{}
	parents := []string{
		filepath.Join(opts.SysfsRoot, "class", "nvme-subsystem"),
		class,
	}
	for _, parent := range parents {
		if err := scanParents(parent, opts.DevRoot, seen); err != nil {
			return nil, err
		}
	}
	out := make([]Namespace, 0, len(seen))
	for _, ns := range seen {
		out = append(out, ns)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// scanParents reads every controller or subsystem directory under class and
// adds the namespaces found below them to seen (first one found wins).
func scanParents(class, devRoot string, seen map[string]Namespace) error {
	ents, err := os.ReadDir(class)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kernel: read %s: %w", class, err)
	}
	for _, e := range ents {
		dir := filepath.Join(class, e.Name())
		nqn, err := readAttr(dir, "subsysnqn")
		if err != nil {
			continue // not a controller/subsystem directory we understand
		}
		if err := scanNamespaces(dir, nqn, devRoot, seen); err != nil {
			return err
		}
	}
	return nil
}

func scanNamespaces(dir, nqn, devRoot string, seen map[string]Namespace) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("kernel: read %s: %w", dir, err)
	}
	for _, e := range ents {
		name := e.Name()
		if !nsName.MatchString(name) {
			continue
		}
		if _, ok := seen[name]; ok {
			continue
		}
		ns, err := readNamespace(filepath.Join(dir, name), name, nqn)
		if err != nil {
			return err
		}
		ns.DevPath = filepath.Join(devRoot, name)
		seen[name] = ns
	}
	return nil
}

func readNamespace(dir, name, nqn string) (Namespace, error) {
	ns := Namespace{Name: name, SubsysNQN: nqn}
	s, err := readAttr(dir, "nsid")
	if err != nil {
		return ns, fmt.Errorf("kernel: namespace %s: %w", name, err)
	}
	id, err := strconv.ParseUint(s, 10, 32)
	if err != nil || id == 0 {
		return ns, fmt.Errorf("kernel: namespace %s: bad nsid %q", name, s)
	}
	ns.NSID = uint32(id)
	ns.UUID, _ = readAttr(dir, "uuid")
	ns.NGUID, _ = readAttr(dir, "nguid")
	ns.WWID, _ = readAttr(dir, "wwid")
	return ns, nil
}

func readAttr(dir, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return "", err
	}
	return strings.Trim(string(b), " \t\r\n\x00"), nil
}
