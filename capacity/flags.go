package capacity

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/meta"
)

// VolumeFlags are the flags of `nvstripe volume create`, with their
// defaults (AddFlags); Spec turns them into the volume to create.
type VolumeFlags struct {
	Size, Chunk        int64
	K, M               int
	Checksum, WriteLog string // "none" turns either off
	SharedDomains      bool
	BindChecksums      bool // checksums bound to their place (format 4); off without checksums
	QoS                QoSFlags
}

// AddFlags defines the flags on fl.
func (f *VolumeFlags) AddFlags(fl *pflag.FlagSet) {
	f.Chunk, f.Checksum, f.WriteLog = 128<<10, meta.ChecksumCRC32C, meta.WriteLogPPL
	fl.Var(units.NewFlag(&f.Size), "size", "volume size, e.g. 4GiB (required)")
	fl.IntVar(&f.K, "k", 4, "data shards per stripe")
	fl.IntVar(&f.M, "m", 2, "parity shards per stripe")
	fl.Var(units.NewFlag(&f.Chunk), "chunk", "chunk (stripe unit) size, a power of two from 4KiB to 4MiB")
	fl.StringVar(&f.Checksum, "checksum", f.Checksum, "block checksums: crc32c or none")
	fl.StringVar(&f.WriteLog, "write-log", f.WriteLog, "partial-parity write log (needs checksums): ppl or none")
	fl.BoolVar(&f.BindChecksums, "bind-checksums", true, "bind each block's checksum to its place (volume, segment, slot, block) so blank, holed or swapped regions are found and rebuilt (format 4); false makes a format 2/3 volume that older builds open")
	fl.BoolVar(&f.SharedDomains, "allow-shared-domains", false, "allow shards of a segment to share a failure domain when there are too few")
	f.QoS.AddFlags(fl)
}

// Spec is the volume name to create; writeLogGiven says whether the
// command line gave --write-log (without checksums the log is off unless
// asked for). Mistakes are config.IsUsage.
func (f *VolumeFlags) Spec(name string, writeLogGiven bool) (meta.VolumeSpec, error) {
	if f.Size == 0 {
		return meta.VolumeSpec{}, config.Usage(errors.New("volume create needs --size"))
	}
	checksum, writeLog := f.Checksum, f.WriteLog
	if checksum == "none" {
		checksum = ""
	}
	if writeLog == "none" || (checksum == "" && !writeLogGiven) {
		writeLog = ""
	}
	qos, err := f.QoS.Change()
	if err != nil {
		return meta.VolumeSpec{}, err
	}
	return meta.VolumeSpec{Name: name, Size: f.Size, Layout: meta.Layout{K: f.K, M: f.M, Chunk: f.Chunk, Checksum: checksum, WriteLog: writeLog},
		AllowSharedDomains: f.SharedDomains, BindChecksums: f.BindChecksums && checksum != "", QoS: qos.Apply(meta.QoS{})}, nil
}
