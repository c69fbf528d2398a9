package volclient

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/meta"
)

// AllowUnfencedHelp is the help of --allow-unfenced (ns add, ns discover):
// meta.NamespaceSpec.AllowUnfenced.
const AllowUnfencedHelp = "place shards on a namespace that cannot fence a stale owner (no NVMe reservations: Linux nvmet before 6.13, some appliances); without it such a namespace is recorded but takes no shards"

// NamespaceFlags are the flags of `nvstripe ns add` but --host-nqn: the
// namespace (Spec) and the DH-HMAC-CHAP secrets to connect to it with.
type NamespaceFlags struct {
	Host, NQN, ID, UUID string
	NSID                uint32
	Paths               []string
	Size                int64 // recorded without connecting when set
	AllowUnfenced       bool
	DHCHAP              DHCHAPFiles
}

// AddFlags defines the flags on fl.
func (f *NamespaceFlags) AddFlags(fl *pflag.FlagSet) {
	fl.StringVar(&f.Host, "host", "", "host the namespace lives on (required)")
	fl.StringVar(&f.NQN, "nqn", "", "subsystem NQN (required)")
	fl.Uint32Var(&f.NSID, "nsid", 0, "namespace ID in the subsystem (required)")
	fl.StringArrayVar(&f.Paths, "path", nil, "path tcp://ADDR:PORT, repeatable (required)")
	fl.Var(units.NewFlag(&f.Size), "size", "record this size without connecting (e.g. 7TiB)")
	fl.StringVar(&f.ID, "id", "", "namespace id in the cluster (default HOST-nNSID; pass one when another subsystem of the host has taken that)")
	fl.StringVar(&f.UUID, "uuid", "", "namespace UUID/NGUID, informational")
	fl.BoolVar(&f.AllowUnfenced, "allow-unfenced", false, AllowUnfencedHelp)
	f.DHCHAP.AddFlags(fl)
}

// Spec checks the flags and returns the namespace to add; mistakes are
// config.IsUsage.
func (f *NamespaceFlags) Spec() (meta.NamespaceSpec, error) {
	if f.Host == "" || f.NQN == "" || f.NSID == 0 || len(f.Paths) == 0 {
		return meta.NamespaceSpec{}, config.Usage(errors.New("ns add needs --host, --nqn, --nsid and at least one --path"))
	}
	paths, err := meta.PathRecords(f.Paths)
	if err != nil {
		return meta.NamespaceSpec{}, config.Usage(err)
	}
	return meta.NamespaceSpec{ID: f.ID, Host: f.Host, NQN: f.NQN, NSID: f.NSID, UUID: f.UUID, AllowUnfenced: f.AllowUnfenced,
		Paths: paths, Size: f.Size}, nil
}
