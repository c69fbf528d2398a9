package health

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, m := range []Meta{
		{Role: RoleTarget, Host: "h1", Labels: map[string]string{"rack": "r1", "row": "2"}, Namespaces: []string{"h1-n1", "h1-n2"}},
		{Role: RoleAgent, Host: "node-7"},
		{Role: RoleController, Host: ""},
	} {
		b, err := m.Encode()
		if err != nil {
			t.Fatalf("encode %+v: %v", m, err)
		}
		got, err := DecodeMeta(b)
		if err != nil {
			t.Fatalf("decode %+v: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip: got %+v want %+v", got, m)
		}
	}
}

func TestMetaErrors(t *testing.T) {
	good, err := Meta{Role: RoleTarget, Host: "h", Namespaces: []string{"a"}}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	big := Meta{Role: RoleTarget, Host: "h", Namespaces: []string{strings.Repeat("x", MaxMetaSize)}}
	if _, err := big.Encode(); !errors.Is(err, ErrInvalid) {
		t.Errorf("oversized meta: %v", err)
	}
	if _, err := (Meta{Host: "h"}).Encode(); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero role: %v", err)
	}
	bad := map[string][]byte{
		"empty":    nil,
		"version":  append([]byte{9}, good[1:]...),
		"role":     append([]byte{1, 7}, good[2:]...),
		"trailing": append(append([]byte{}, good...), 0),
	}
	for i := 1; i < len(good); i++ {
		bad["truncated"+strings.Repeat("-", i)] = good[:i]
	}
	for name, b := range bad {
		if _, err := DecodeMeta(b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: DecodeMeta(%x) = %v, want ErrInvalid", name, b, err)
		}
	}
}

func TestParseRole(t *testing.T) {
	for _, r := range []Role{RoleTarget, RoleAgent, RoleController} {
		if got, err := ParseRole(r.String()); err != nil || got != r {
			t.Errorf("ParseRole(%q) = %v, %v", r, got, err)
		}
	}
	if _, err := ParseRole("boss"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseRole(boss) = %v", err)
	}
}

func FuzzDecodeMeta(f *testing.F) {
	good, _ := Meta{Role: RoleTarget, Host: "h", Labels: map[string]string{"k": "v"}, Namespaces: []string{"a"}}.Encode()
	f.Add(good)
	f.Add([]byte{1, 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b)
		if err != nil {
			return
		}
		again, err := m.Encode()
		if err != nil && len(b) <= MaxMetaSize {
			t.Fatalf("decoded %+v does not encode: %v", m, err)
		}
		if err == nil {
			if m2, err := DecodeMeta(again); err != nil || !reflect.DeepEqual(m, m2) {
				t.Fatalf("re-decode: %+v %v", m2, err)
			}
		}
	})
}
