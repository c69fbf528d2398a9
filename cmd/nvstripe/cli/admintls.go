package cli

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/controller/admin"
)

// registerAdminTLS defines --admin-tls-cert, --admin-tls-key and
// --admin-tls-ca (the admin API's mutual TLS on TCP) on fl; whose names
// the side the certificate is for.
func registerAdminTLS(fl *pflag.FlagSet, f *admin.TLSFiles, whose string) {
	fl.StringVar(&f.Cert, "admin-tls-cert", "", whose+" certificate for the admin API on TCP (PEM; env NVSTRIPE_ADMIN_TLS_CERT)")
	fl.StringVar(&f.Key, "admin-tls-key", "", "the key of --admin-tls-cert (PEM; env NVSTRIPE_ADMIN_TLS_KEY)")
	fl.StringVar(&f.CA, "admin-tls-ca", "", "the CA that signs the other side's admin API certificates (PEM; env NVSTRIPE_ADMIN_TLS_CA)")
}

// adminError makes a missing admin TLS file a usage error.
func adminError(err error) error {
	if errors.Is(err, admin.ErrTLSRequired) {
		return usageError{err}
	}
	return err
}
