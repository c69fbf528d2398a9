package meta

import (
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"strings"
)

// HolderName returns a valid owner name (1-63 letters, digits, '.', '_' or
// '-', starting with a letter or digit) made of prefix, a dot and this
// host's name: host as given, sanitized (each character a name cannot hold
// becomes '-', leading and trailing punctuation goes), or, where host is
// unset ("", "(none)" as the kernel reports an unset hostname, "localhost")
// or sanitizes to nothing, "node-" and 12 hex digits of a hash of the first
// non-empty of ids (a machine id, a hardware address: stable across
// restarts), or "node" without one. The result is cut to 63 characters.
func HolderName(prefix, host string, ids ...string) string {
	name := sanitize(host)
	switch host {
	case "", "(none)", "localhost", "localhost.localdomain":
		name = ""
	}
	if name == "" {
		name = nodeID(ids)
	}
	full := name
	if prefix != "" {
		full = sanitize(prefix) + "." + name
	}
	return strings.TrimRight(full[:min(len(full), 63)], ".-_")
}

// sanitize keeps the characters a name may hold, makes the others '-', and
// trims punctuation at both ends.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), ".-_")
}

// nodeID names a host from the first non-empty id.
func nodeID(ids []string) string {
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" {
			h := fnv.New64a()
			h.Write([]byte(id))
			return fmt.Sprintf("node-%012x", h.Sum64()&(1<<48-1))
		}
	}
	return "node"
}

// DefaultHolder is HostHolder(prefix, os.Hostname()).
func DefaultHolder(prefix string) string {
	host, _ := os.Hostname()
	return HostHolder(prefix, host)
}

// HostHolder is HolderName(prefix, host, ...) with this machine's stable
// ids: /etc/machine-id, the DMI product UUID and the first hardware address
// of a network interface.
func HostHolder(prefix, host string) string {
	var ids []string
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id", "/sys/class/dmi/id/product_uuid"} {
		if b, err := os.ReadFile(p); err == nil {
			ids = append(ids, string(b))
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 && len(i.HardwareAddr) > 0 {
			ids = append(ids, i.HardwareAddr.String())
			break
		}
	}
	return HolderName(prefix, host, ids...)
}
