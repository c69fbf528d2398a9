package nbd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// serverTLS requires client certificates signed by the CA.
func serverTLS(p *nbdtest.PKI) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.Server}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: p.Pool, MinVersion: tls.VersionTLS12}
}

func serveTLS(t *testing.T, p *nbdtest.PKI) (*Server, string) {
	m := newMem(t, 8<<20, 4096)
	return serve(t, Options{Exports: map[string]Export{"mem": {Device: m}}, TLS: serverTLS(p), RequireTLS: true}, "tcp")
}

// TestTLSRequired: before STARTTLS a plain-text client gets
// NBD_REP_ERR_TLS_REQD for every option and is dropped for EXPORT_NAME.
func TestTLSRequired(t *testing.T) {
	_, addr := serveTLS(t, nbdtest.NewPKI(t))
	rc := dialRaw(t, "tcp", addr, proto.FlagCFixedNewstyle)
	for _, code := range []proto.Option{proto.OptList, proto.OptInfo, proto.OptGo, proto.OptStructuredReply} {
		if r := rc.option(code, nil); len(r) != 1 || r[0].typ != proto.RepErrTLSReqd {
			t.Errorf("%v before TLS: %+v, want NBD_REP_ERR_TLS_REQD", code, r)
		}
	}
	if r := rc.option(proto.OptStartTLS, []byte{1}); len(r) != 1 || r[0].typ != proto.RepErrInvalid {
		t.Errorf("STARTTLS with data: %+v, want NBD_REP_ERR_INVALID", r)
	}
	rc.write(proto.AppendOption(nil, proto.OptExportName, []byte("mem")))
	rc.expectClosed()
}

// TestTLSRoundTrip: STARTTLS, then the handshake and transmission go
// through TLS (a Go client); a second STARTTLS is refused; a server
// without TLS answers STARTTLS unsupported.
func TestTLSRoundTrip(t *testing.T) {
	p := nbdtest.NewPKI(t)
	_, addr := serveTLS(t, p)
	rc := dialRaw(t, "tcp", addr, proto.FlagCFixedNewstyle)
	if r := rc.option(proto.OptStartTLS, nil); len(r) != 1 || r[0].typ != proto.RepAck {
		t.Fatalf("STARTTLS: %+v", r)
	}
	tc := tls.Client(rc.c, &tls.Config{RootCAs: p.Pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{p.Client}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	rc.c, rc.br = tc, bufio.NewReader(tc)
	if r := rc.option(proto.OptStartTLS, nil); len(r) != 1 || r[0].typ != proto.RepErrInvalid {
		t.Errorf("second STARTTLS: %+v, want NBD_REP_ERR_INVALID", r)
	}
	size, _ := rc.goExport("mem", false)
	if size != 8<<20 {
		t.Fatalf("size %d", size)
	}
	data := testutil.Pattern(4096, 7)
	rc.send(proto.Request{Type: proto.CmdWrite, Cookie: 1, Offset: 8192, Length: 4096}, data)
	if e, _, _ := rc.simple(0); e != 0 {
		t.Fatalf("write: errno %v", e)
	}
	rc.send(proto.Request{Type: proto.CmdRead, Cookie: 2, Offset: 8192, Length: 4096}, nil)
	if e, _, got := rc.simple(4096); e != 0 || !bytes.Equal(got, data) {
		t.Fatalf("read back over TLS: errno %v, equal %t", e, bytes.Equal(got, data))
	}

	_, plain := serveMem(t, 1<<20, 4096)
	pc := dialRaw(t, "tcp", plain, proto.FlagCFixedNewstyle)
	if r := pc.option(proto.OptStartTLS, nil); len(r) != 1 || r[0].typ != proto.RepErrUnsup {
		t.Errorf("STARTTLS without TLS configured: %+v, want NBD_REP_ERR_UNSUP", r)
	}
}

// TestTLSLibnbd: libnbd's tools over nbds:// with the certificate
// directory: a copy round trip; refused without a client certificate and
// in plain text.
func TestTLSLibnbd(t *testing.T) {
	need(t, "nbdcopy")
	need(t, "nbdinfo")
	p := nbdtest.NewPKI(t)
	_, addr := serveTLS(t, p)
	u := "nbds://" + addr + "/mem?tls-certificates=" + p.ClientDir
	src, dst := filepath.Join(t.TempDir(), "src"), filepath.Join(t.TempDir(), "dst")
	want := testutil.Pattern(8<<20, 3)
	os.WriteFile(src, want, 0o600)
	run(t, "nbdcopy", src, u)
	run(t, "nbdcopy", u, dst)
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, want) {
		t.Fatal("nbdcopy round trip over TLS differs")
	}
	if out, err := runErr(t, "nbdinfo", "nbds://"+addr+"/mem?tls-certificates="+p.CAOnlyDir); err == nil {
		t.Errorf("nbdinfo without a client certificate succeeded:\n%s", out)
	}
	if out, err := runErr(t, "nbdinfo", uri(addr, "mem")); err == nil {
		t.Errorf("plain-text nbdinfo succeeded against --tls=require:\n%s", out)
	}
}

// TestTLSClientKeyKinds: nbdinfo (GnuTLS) proves itself with an RSA client
// certificate as with an ECDSA one, both of a CA the server requires. Go's
// TLS 1.3 certificate request names RSA keys only by the RSA-PSS schemes,
// and GnuTLS 3.7 then finds no usable RSA certificate and sends none: the
// server was refusing it ("client didn't provide a certificate") where
// nbdkit accepted the same directory.
func TestTLSClientKeyKinds(t *testing.T) {
	need(t, "nbdinfo")
	for _, k := range []struct {
		name string
		kind nbdtest.KeyKind
	}{{"rsa", nbdtest.RSA}, {"ecdsa", nbdtest.ECDSA}} {
		t.Run(k.name, func(t *testing.T) {
			p := nbdtest.NewPKIOf(t, k.kind)
			_, addr := serveTLS(t, p)
			out := run(t, "nbdinfo", "--size", "nbds://"+addr+"/mem?tls-certificates="+p.ClientDir)
			if strings.TrimSpace(out) != "8388608" {
				t.Fatalf("nbdinfo --size over TLS with a %s client certificate: %q", k.name, out)
			}
			if out, err := runErr(t, "nbdinfo", "nbds://"+addr+"/mem?tls-certificates="+p.CAOnlyDir); err == nil {
				t.Errorf("nbdinfo without a client certificate succeeded:\n%s", out)
			}
		})
	}
}

// BenchmarkNbdcopyTLS copies a 64 MiB export to null: with nbdcopy in
// plain text and over TLS, in interleaved rounds. The CPU time per GiB of
// this process (the server) and of nbdcopy is steadier than MB/s on a
// busy machine.
//
//	go test -run XXX -bench NbdcopyTLS -benchtime 10x ./nbd/
func BenchmarkNbdcopyTLS(b *testing.B) {
	if _, err := exec.LookPath("nbdcopy"); err != nil {
		b.Skip("nbdcopy (libnbd-bin) not installed")
	}
	p := nbdtest.NewPKI(b)
	m, err := newBenchMem(64 << 20)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.WriteAt(context.Background(), testutil.Pattern(64<<20, 5), 0); err != nil {
		b.Fatal(err) // data everywhere: nbdcopy skips holes
	}
	s, err := NewServer(Options{Exports: map[string]Export{"m": {Device: m}}, TLS: serverTLS(p)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	addr := testutil.ServeListener(b, s.Serve)
	for _, u := range []struct{ name, uri string }{ // interleaved rounds
		{"plain", "nbd://" + addr + "/m"}, {"tls", "nbds://" + addr + "/m?tls-certificates=" + p.ClientDir},
		{"plain", "nbd://" + addr + "/m"}, {"tls", "nbds://" + addr + "/m?tls-certificates=" + p.ClientDir},
		{"plain", "nbd://" + addr + "/m"}, {"tls", "nbds://" + addr + "/m?tls-certificates=" + p.ClientDir},
	} {
		b.Run(u.name, func(b *testing.B) {
			b.SetBytes(64 << 20)
			self0, child0 := rusage(syscall.RUSAGE_SELF), rusage(syscall.RUSAGE_CHILDREN)
			for range b.N {
				if out, err := exec.Command("nbdcopy", u.uri, "null:").CombinedOutput(); err != nil {
					b.Fatalf("%v\n%s", err, out)
				}
			}
			gib := float64(b.N) * (64 << 20) / (1 << 30)
			b.ReportMetric(float64((rusage(syscall.RUSAGE_SELF)-self0).Milliseconds())/gib, "server-cpu-ms/GiB")
			b.ReportMetric(float64((rusage(syscall.RUSAGE_CHILDREN)-child0).Milliseconds())/gib, "nbdcopy-cpu-ms/GiB")
		})
	}
}

// rusage is the user and system CPU time of who (RUSAGE_SELF: this
// process; RUSAGE_CHILDREN: its children that were waited for).
func rusage(who int) time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
