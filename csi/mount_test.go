package csi

import "testing"

// TestParseMountInfo: a mountinfo line gives its fields, octal escapes
// undone and "ro" among the options read; a line too short is no mount.
func TestParseMountInfo(t *testing.T) {
	m, ok := parseMountInfo(`36 35 98:0 /vol\0401 /mnt/a\040b ro,noatime master:1 - ext4 /dev/nbd\0400 rw,errors=continue`)
	want := mountEntry{Dev: "98:0", Root: "/vol 1", Point: "/mnt/a b", FSType: "ext4", Source: "/dev/nbd 0", ReadOnly: true}
	if !ok || m != want {
		t.Fatalf("parsed %+v %t, want %+v", m, ok, want)
	}
	if m, ok := parseMountInfo("36 35 98:0 / /mnt rw - ext4 /dev/nbd0 rw"); !ok || m.ReadOnly {
		t.Fatalf("rw mount: %+v %t", m, ok)
	}
	for _, bad := range []string{"", "36 35 98:0 / /mnt - ext4 /dev/nbd0", "36 35 98:0 / /mnt rw - ext4", "36 35 98:0 / /mnt rw ext4 /dev/nbd0"} {
		if m, ok := parseMountInfo(bad); ok {
			t.Errorf("%q parsed as %+v", bad, m)
		}
	}
}
