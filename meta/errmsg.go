package meta

import (
	"fmt"
	"strconv"
	"strings"
)

// classError is an error of a class (ErrExists, ErrNotFound, ...) whose
// message already says so, so that it does not end in the class's words
// again ("already exists: already exists").
type classError struct {
	msg   string
	class error
}

func (e *classError) Error() string { return e.msg }
func (e *classError) Unwrap() error { return e.class }

// classErrorf returns an error that Is class with the formatted message.
func classErrorf(class error, format string, args ...any) error {
	return &classError{msg: fmt.Sprintf(format, args...), class: class}
}

// describe names the record at key for people: `namespace "t9-n1"` rather
// than /nvstripe/default/ns/t9-n1.
func (k keys) describe(key string) string {
	rest, ok := strings.CutPrefix(key, k.root)
	if !ok {
		return key
	}
	kinds := []struct{ prefix, name string }{{"hosts/", "host"}, {"ns/", "namespace"}, {"alloc/", "allocation of namespace"},
		{"vol/", "volume"}, {"task/", "task"}, {"seg/", "segment"}, {"dirty/", "dirty segment"}, {"owner/", "owner of volume"},
		{"lastrw/", "last read-write owner of volume"}}
	for _, kd := range kinds {
		name, ok := strings.CutPrefix(rest, kd.prefix)
		if !ok {
			continue
		}
		if name == "" {
			return kd.name + " records"
		}
		if vol, hex, ok := strings.Cut(name, "/"); ok && (kd.name == "segment" || kd.name == "dirty segment") {
			if i, err := strconv.ParseInt(hex, 16, 64); err == nil {
				return fmt.Sprintf("%s %s/%d", kd.name, vol, i)
			}
		}
		if kd.name == "owner of volume" {
			name, _, _ = strings.Cut(name, "/")
		}
		return fmt.Sprintf("%s %q", kd.name, name)
	}
	if rest == "cluster" {
		return "the cluster record"
	}
	return key
}
