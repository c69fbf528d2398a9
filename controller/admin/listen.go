package admin

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nvstripe/nvstripe/internal/tlsfiles"
	"github.com/nvstripe/nvstripe/meta"
)

// DefaultSocket is where a controller serves the admin API unless told
// otherwise, and where `nvstripe admin` looks for it.
const DefaultSocket = "/run/nvstripe/controller.sock"

// ErrTLSRequired refuses the admin API on TCP without mutual TLS: the API
// acts with the controller's etcd credentials, so whoever reaches it must
// prove who they are.
var ErrTLSRequired = errors.New("the admin API on TCP needs mutual TLS (--admin-tls-cert, --admin-tls-key and --admin-tls-ca)")

// ErrSocketInUse refuses a unix socket another live server listens on.
var ErrSocketInUse = errors.New("admin socket in use")

// TLSFiles name the PEM files of a mutual-TLS admin connection: this side's
// certificate and key, and the CA that signed the other side's.
type TLSFiles struct{ Cert, Key, CA string }

// IsZero says whether no file is named.
func (f TLSFiles) IsZero() bool { return f == TLSFiles{} }

// serverTLS requires and verifies a client certificate signed by CA (TLS
// 1.3; every file is required).
func (f TLSFiles) serverTLS() (*tls.Config, error) {
	return f.load(tlsfiles.Files.Server)
}

// clientTLS presents Cert and verifies the server against CA (TLS 1.3;
// every file is required).
func (f TLSFiles) clientTLS() (*tls.Config, error) {
	return f.load(tlsfiles.Files.Client)
}

// load checks that every file is named and loads them with side.
func (f TLSFiles) load(side func(tlsfiles.Files) (*tls.Config, error)) (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return nil, ErrTLSRequired
	}
	cfg, err := side(tlsfiles.Files{Cert: f.Cert, Key: f.Key, CA: f.CA})
	if err != nil {
		return nil, fmt.Errorf("admin API TLS: %w", err)
	}
	cfg.MinVersion = tls.VersionTLS13
	return cfg, nil
}

// unixPath returns the socket path of a unix address ("unix:PATH" or an
// absolute path), or "" for a TCP one.
func unixPath(addr string) string {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		return p
	}
	if filepath.IsAbs(addr) {
		return addr
	}
	return ""
}

// CheckListen says, without listening, why Listen would refuse addr and
// tlsf: a TCP address that is not HOST:PORT, or without every TLS file,
// or with one that does not load. A unix socket is checked when it is
// bound.
func CheckListen(addr string, tlsf TLSFiles) error {
	if unixPath(addr) != "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("admin API address %q: want unix:PATH, /PATH or HOST:PORT: %w", addr, err)
	}
	if _, err := tlsf.serverTLS(); err != nil {
		return fmt.Errorf("admin API on %s: %w", addr, err)
	}
	return nil
}

// Listen serves the admin API on addr until the returned function is
// called. addr is a unix socket ("unix:PATH" or an absolute path; created
// mode 0600, its directory made if missing), reached only by its owner, tlsf
// unused; or
// TCP "HOST:PORT" (port 0 picks one), which needs every file of tlsf and
// takes only clients with a certificate signed by tlsf.CA. It returns the
// bound address in the form Dial takes.
func Listen(s *meta.Store, addr string, tlsf TLSFiles) (string, func(), error) {
	if p := unixPath(addr); p != "" {
		ln, err := listenUnix(p)
		if err != nil {
			return "", nil, err
		}
		srv := NewServer(s)
		go srv.Serve(ln)
		return "unix:" + p, func() { srv.Stop(); os.Remove(p) }, nil
	}
	cfg, err := tlsf.serverTLS()
	if err != nil {
		return "", nil, fmt.Errorf("admin API on %s: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("admin API listener: %w", err)
	}
	srv := NewServer(s, grpc.Creds(credentials.NewTLS(cfg)))
	go srv.Serve(ln)
	return ln.Addr().String(), srv.Stop, nil
}

// listenUnix binds a unix socket at path with mode 0600. It binds in a
// fresh directory of mode 0700 beside path and renames the socket into
// place, so no one can connect before the mode is set. A stale socket
// (nothing answers) is replaced; a live one is ErrSocketInUse.
func listenUnix(path string) (*net.UnixListener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("admin socket directory: %w", err)
	}
	if err := clearStale(path); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(dir, ".admin-")
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	defer os.RemoveAll(tmp)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(tmp, "s"), Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	err = os.Chmod(filepath.Join(tmp, "s"), 0o600)
	if err == nil {
		err = os.Rename(filepath.Join(tmp, "s"), path)
	}
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	return ln, nil
}

// clearStale removes a socket at path that nothing listens on.
func clearStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("admin socket %s: exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("%w: another controller serves %s (give --api another path)", ErrSocketInUse, path)
	}
	return os.Remove(path)
}

// LocalSocket returns path (DefaultSocket, for `nvstripe admin`) as an
// address when a controller answers on it (one runs on this machine), else
// "". stale says a socket file is there that nobody listens on (left by a
// controller that died): callers go on as without one, and may say so.
func LocalSocket(path string) (addr string, stale bool) {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Type() != fs.ModeSocket {
		return "", false
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "", true
	}
	if err == nil {
		c.Close()
	}
	return "unix:" + path, false
}

// dialCreds are the transport credentials for addr: none on a unix socket
// (its mode guards it), mutual TLS on TCP.
func dialCreds(addr string, tlsf TLSFiles) (string, grpc.DialOption, error) {
	if p := unixPath(addr); p != "" {
		return "unix://" + p, grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	cfg, err := tlsf.clientTLS()
	if err != nil {
		return "", nil, err
	}
	return addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)), nil
}

// AddFlags defines --admin-tls-cert, --admin-tls-key and --admin-tls-ca on
// fl; whose names the side the certificate is for ("the controller's").
func (f *TLSFiles) AddFlags(fl *pflag.FlagSet, whose string) {
	fl.StringVar(&f.Cert, "admin-tls-cert", "", whose+" certificate for the admin API on TCP (PEM; env NVSTRIPE_ADMIN_TLS_CERT)")
	fl.StringVar(&f.Key, "admin-tls-key", "", "the key of --admin-tls-cert (PEM; env NVSTRIPE_ADMIN_TLS_KEY)")
	fl.StringVar(&f.CA, "admin-tls-ca", "", "the CA that signs the other side's admin API certificates (PEM; env NVSTRIPE_ADMIN_TLS_CA)")
}
