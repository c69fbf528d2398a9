package volume

import "github.com/nvstripe/nvstripe/blockdev/faultdev"

func faultFail(err error) faultdev.Rule {
	return faultdev.Rule{Action: faultdev.Fail, Ops: faultdev.OpRead, Err: err}
}
