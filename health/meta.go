package health

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
)

// ErrInvalid marks bad input: a malformed Meta, a bad Config, an unknown
// role name. Test with errors.Is.
var ErrInvalid = errors.New("health: invalid input")

// metaVersion is the first byte of an encoded Meta.
const metaVersion = 1

// MaxMetaSize is the largest encoded Meta memberlist carries.
const MaxMetaSize = 512

// Role is what a gossiping process does.
type Role uint8

// Roles. The zero Role is invalid.
const (
	RoleTarget     Role = 1 + iota // serves namespaces (nvstripe target or target-agent)
	RoleAgent                      // maps volumes on a client node
	RoleController                 // runs the controller
)

var roleNames = map[Role]string{RoleTarget: "target", RoleAgent: "agent", RoleController: "controller"}

// String returns target, agent or controller.
func (r Role) String() string {
	if s, ok := roleNames[r]; ok {
		return s
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ParseRole parses a role name (see Role.String).
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("unknown role %q (want target, agent or controller): %w", s, ErrInvalid)
}

// Meta is what a member tells the pool about itself.
type Meta struct {
	Role Role
	// Host is the machine's name: the failure-domain host of the
	// namespaces it serves.
	Host string
	// Labels are failure-domain labels such as rack=r1.
	Labels map[string]string
	// Namespaces are the IDs of the namespaces this member serves (targets).
	Namespaces []string
}

// Encode returns m in the wire format of the package doc. It fails with
// ErrInvalid when the role is unknown or the result exceeds MaxMetaSize.
func (m Meta) Encode() ([]byte, error) {
	if _, ok := roleNames[m.Role]; !ok {
		return nil, fmt.Errorf("meta: %v: %w", m.Role, ErrInvalid)
	}
	b := []byte{metaVersion, byte(m.Role)}
	b = appendString(b, m.Host)
	keys := make([]string, 0, len(m.Labels))
	for k := range m.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(appendString(b, k), m.Labels[k])
	}
	b = binary.AppendUvarint(b, uint64(len(m.Namespaces)))
	for _, ns := range m.Namespaces {
		b = appendString(b, ns)
	}
	if len(b) > MaxMetaSize {
		return nil, fmt.Errorf("meta of host %q is %d bytes, over the %d that gossip carries (fewer or shorter namespace IDs): %w",
			m.Host, len(b), MaxMetaSize, ErrInvalid)
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// DecodeMeta parses the wire format of the package doc.
func DecodeMeta(b []byte) (Meta, error) {
	d := decoder{b: b}
	if v := d.u8(); v != metaVersion && d.err == nil {
		return Meta{}, fmt.Errorf("meta version %d, want %d: %w", v, metaVersion, ErrInvalid)
	}
	m := Meta{Role: Role(d.u8()), Host: d.string()}
	if n := d.count(); n > 0 {
		m.Labels = make(map[string]string, n)
		for range n {
			k := d.string()
			m.Labels[k] = d.string()
		}
	}
	for n := d.count(); n > 0; n-- {
		m.Namespaces = append(m.Namespaces, d.string())
	}
	switch {
	case d.err != nil:
		return Meta{}, d.err
	case len(d.b) != 0:
		return Meta{}, fmt.Errorf("meta: %d trailing bytes: %w", len(d.b), ErrInvalid)
	case roleNames[m.Role] == "":
		return Meta{}, fmt.Errorf("meta: %v: %w", m.Role, ErrInvalid)
	}
	return m, nil
}

// decoder reads the wire format; the first error sticks and later reads
// return zero values.
type decoder struct {
	b   []byte
	err error
}

var errShort = fmt.Errorf("meta: truncated: %w", ErrInvalid)

func (d *decoder) u8() byte {
	if d.err != nil || len(d.b) == 0 {
		d.err = errShort
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// count reads a uvarint that counts items of at least one byte each.
func (d *decoder) count() int {
	if d.err != nil {
		return 0
	}
	n, k := binary.Uvarint(d.b)
	if k <= 0 || n > uint64(len(d.b)) {
		d.err = errShort
		return 0
	}
	d.b = d.b[k:]
	return int(n)
}

func (d *decoder) string() string {
	n := d.count()
	if d.err != nil || n > len(d.b) {
		d.err = errShort
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// clone returns a deep copy of m.
func (m Meta) clone() Meta {
	c := m
	if m.Labels != nil {
		c.Labels = make(map[string]string, len(m.Labels))
		for k, v := range m.Labels {
			c.Labels[k] = v
		}
	}
	c.Namespaces = slices.Clone(m.Namespaces)
	return c
}
