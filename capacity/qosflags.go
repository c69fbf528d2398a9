package capacity

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/meta"
)

// QoSFlags are the QoS flags of `nvstripe volume create` and `volume set`:
// --qos-iops N, --qos-bps SIZE/s, their --qos-read-* and --qos-write-*
// forms, and --qos-burst DURATION. Only the flags given change anything;
// 0 removes a limit.
type QoSFlags struct {
	c meta.QoSChange
}

// AddFlags defines the flags on fl.
func (f *QoSFlags) AddFlags(fl *pflag.FlagSet) {
	fl.Var(qosCount{&f.c.IOPS}, "qos-iops", "limit of read and write requests a second, large or small alike (0: none)")
	fl.Var(qosCount{&f.c.ReadIOPS}, "qos-read-iops", "limit of read requests a second (0: none)")
	fl.Var(qosCount{&f.c.WriteIOPS}, "qos-write-iops", "limit of write requests a second, trims and zeroing included (0: none)")
	fl.Var(qosRate{&f.c.BPS}, "qos-bps", "limit of bytes read and written a second, e.g. 200MiB/s (0: none)")
	fl.Var(qosRate{&f.c.ReadBPS}, "qos-read-bps", "limit of bytes read a second (0: none)")
	fl.Var(qosRate{&f.c.WriteBPS}, "qos-write-bps", "limit of bytes written a second (0: none)")
	fl.Var(qosBurst{&f.c.BurstMS}, "qos-burst", fmt.Sprintf("how long each limit may be used at once after a pause (default %v, at most %v)", meta.DefaultQoSBurst, meta.MaxQoSBurst))
}

// Change is the change the flags given ask for; a bad value is
// config.IsUsage.
func (f *QoSFlags) Change() (meta.QoSChange, error) {
	if err := f.c.Apply(meta.QoS{}).Check(); err != nil {
		return meta.QoSChange{}, config.Usage(err)
	}
	return f.c, nil
}

// Set sets the flag name ("qos-iops", ...) to value as the command line
// would: other front ends (the CSI driver's StorageClass parameters) parse
// limits exactly as the flags do.
func (f *QoSFlags) Set(name, value string) error {
	fl := pflag.NewFlagSet("qos", pflag.ContinueOnError)
	f.AddFlags(fl)
	return fl.Set(name, value)
}

// Given reports whether any QoS flag was given.
func (f *QoSFlags) Given() bool { return f.c != meta.QoSChange{} }

// qosCount is a request rate flag: a whole number, 0 or more.
type qosCount struct{ p **int64 }

func (v qosCount) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("%q: want a whole number of requests a second, 0 for no limit", s)
	}
	*v.p = &n
	return nil
}
func (v qosCount) String() string { return fmtOpt(*v.p, strconv.FormatInt) }
func (v qosCount) Type() string   { return "N" }

// qosRate is a byte rate flag (units.ParseRate).
type qosRate struct{ p **int64 }

func (v qosRate) Set(s string) error {
	n, err := units.ParseRate(s)
	if err != nil {
		return err
	}
	*v.p = &n
	return nil
}
func (v qosRate) String() string {
	return fmtOpt(*v.p, func(n int64, _ int) string { return units.FormatRate(n) })
}
func (v qosRate) Type() string { return "SIZE/s" }

// qosBurst is a duration flag stored in milliseconds.
type qosBurst struct{ p **int64 }

func (v qosBurst) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d%time.Millisecond != 0 {
		return fmt.Errorf("%q: want a duration in whole milliseconds such as 500ms or 2s", s)
	}
	ms := d.Milliseconds()
	*v.p = &ms
	return nil
}
func (v qosBurst) String() string {
	return fmtOpt(*v.p, func(n int64, _ int) string { return (time.Duration(n) * time.Millisecond).String() })
}
func (v qosBurst) Type() string { return "duration" }

func fmtOpt(p *int64, f func(int64, int) string) string {
	if p == nil {
		return ""
	}
	return f(*p, 10)
}
