// Package identity gives a node its NVMe host identity, a host NQN and a
// 16-byte host ID, once: read from nvme-cli's files (/etc/nvme/hostnqn,
// /etc/nvme/hostid) when present, else from nvstripe's own store
// (/etc/nvstripe), else generated (a random UUID, the NQN in nvme-cli's
// "nqn.2014-08.org.nvmexpress:uuid:" form) and stored there, so that every
// later run (agent, map, controller, ns add) presents the same identity.
// Targets allow hosts by NQN and DH-HMAC-CHAP keys are bound to it.
package identity

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
)

// UUIDPrefix starts a host NQN made from a UUID (NVMe base spec 4.7).
const UUIDPrefix = "nqn.2014-08.org.nvmexpress:uuid:"

// File names, as nvme-cli uses them.
const (
	NQNFile = "hostnqn"
	IDFile  = "hostid"
)

// ErrInvalid marks a file whose content is not a host NQN or a host ID.
var ErrInvalid = errors.New("invalid host identity")

// Host is a node's NVMe host identity.
type Host struct {
	NQN string
	ID  [16]byte
}

// Dirs say where identities are looked for: NVMe (nvme-cli's, read only;
// "" skips it) first, then Store, where generated values are written.
type Dirs struct {
	NVMe  string
	Store string
}

// DefaultDirs are the system locations.
var DefaultDirs = Dirs{NVMe: "/etc/nvme", Store: "/etc/nvstripe"}

// Load returns the node's identity. The NQN comes from the first of
// NVMe/hostnqn and Store/hostnqn that exists; the ID likewise from
// hostid, else from the UUID of a UUID-form NQN. What is found nowhere is
// generated and written to Store (created 0755, files 0644), once: when
// two processes race, both end up with the first one's file.
func Load(d Dirs) (Host, error) {
	var h Host
	nqn, err := find(d, NQNFile, parseNQN)
	if err != nil {
		return h, err
	}
	id, err := find(d, IDFile, parseID)
	if err != nil {
		return h, err
	}
	if id == nil {
		if u, ok := uuidOfNQN(nqn); ok {
			id = &u
		}
	}
	if id == nil {
		if id, err = store(d.Store, IDFile, uuid.NewString(), parseID); err != nil {
			return h, err
		}
	}
	if nqn == nil {
		if nqn, err = store(d.Store, NQNFile, UUIDPrefix+FormatUUID(*id), parseNQN); err != nil {
			return h, err
		}
	}
	return Host{NQN: *nqn, ID: *id}, nil
}

// find reads name from the first directory that has it; nil when none.
func find[T any](d Dirs, name string, parse func(string) (T, error)) (*T, error) {
	for _, dir := range []string{d.NVMe, d.Store} {
		if dir == "" {
			continue
		}
		v, err := readFile(filepath.Join(dir, name), parse)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &v, nil
	}
	return nil, nil
}

func readFile[T any](path string, parse func(string) (T, error)) (T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := parse(strings.TrimSpace(string(b)))
	if err != nil {
		return v, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// store writes value to dir/name unless the file appeared meanwhile, and
// returns what the file holds.
func store[T any](dir, name, value string, parse func(string) (T, error)) (*T, error) {
	if dir == "" {
		return nil, fmt.Errorf("identity: no %s found and no directory to store one", name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(value + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	path := filepath.Join(dir, name)
	if err == nil {
		// Link, not rename: a file another process stored first wins.
		if err = os.Link(tmp.Name(), path); errors.Is(err, os.ErrExist) {
			err = nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("identity: store %s: %w", path, err)
	}
	v, err := readFile(path, parse)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// CheckNQN validates a host NQN: "nqn." followed by printable characters,
// at most 223 bytes (NVMe base spec 4.7).
func CheckNQN(s string) error {
	_, err := parseNQN(s)
	return err
}

func parseNQN(s string) (string, error) {
	if !strings.HasPrefix(s, "nqn.") || len(s) > 223 {
		return "", fmt.Errorf("%w: NQN %q must start with \"nqn.\" and have at most 223 bytes", ErrInvalid, s)
	}
	for _, r := range s {
		if r <= ' ' || r > '~' {
			return "", fmt.Errorf("%w: NQN %q has a space or non-ASCII character", ErrInvalid, s)
		}
	}
	return s, nil
}

func parseID(s string) ([16]byte, error) {
	u, err := ParseUUID(s)
	if err != nil {
		return u, fmt.Errorf("%w: host ID: %w", ErrInvalid, err)
	}
	return u, nil
}

func uuidOfNQN(nqn *string) ([16]byte, bool) {
	if nqn == nil || !strings.HasPrefix(*nqn, UUIDPrefix) {
		return [16]byte{}, false
	}
	u, err := ParseUUID(strings.TrimPrefix(*nqn, UUIDPrefix))
	return u, err == nil
}

// ParseUUID parses the 8-4-4-4-12 hex form (only that one of the forms
// github.com/google/uuid reads).
func ParseUUID(s string) ([16]byte, error) {
	if len(s) != 36 {
		return [16]byte{}, fmt.Errorf("%q is not a UUID (8-4-4-4-12 hex digits)", s)
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return [16]byte{}, fmt.Errorf("%q is not a UUID: %w", s, err)
	}
	return u, nil
}

// FormatUUID writes u in the lower-case 8-4-4-4-12 form.
func FormatUUID(u [16]byte) string { return uuid.UUID(u).String() }
