package agent

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestCheckForeground checks NBD TLS is refused for anything but an NBD
// export, and a bad spec is refused before anything is opened.
func TestCheckForeground(t *testing.T) {
	withTLS := Options{NBDTLS: &tls.Config{}}
	export := Spec{Volume: "v", Via: ViaNBDListen, Where: "127.0.0.1:0"}
	if err := CheckForeground(export, withTLS); err != nil {
		t.Fatalf("TLS NBD export: %v", err)
	}
	fuse := Spec{Volume: "v", Via: ViaFUSE, Where: t.TempDir()}
	if err := CheckForeground(fuse, withTLS); !errors.Is(err, ErrTLSNotExport) {
		t.Fatalf("TLS on a FUSE map: %v, want ErrTLSNotExport", err)
	}
	if err := CheckForeground(fuse, Options{}); err != nil {
		t.Fatalf("FUSE map without TLS: %v", err)
	}
	if err := CheckForeground(Spec{Volume: "a/b", Via: ViaNBDListen, Where: "127.0.0.1:0"}, Options{}); err == nil {
		t.Fatal("a bad volume name passed")
	}
}

// TestLogfFromLog: an agent given only Log logs its events there.
func TestLogfFromLog(t *testing.T) {
	var b strings.Builder
	o := Options{Log: slog.New(slog.NewTextHandler(&b, nil))}
	o.ensureDefaults()
	o.Logf("mapped %s", "v1")
	if !strings.Contains(b.String(), "mapped v1") {
		t.Fatalf("Logf wrote %q to Log, want the event", b.String())
	}
}
