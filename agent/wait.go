package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/nvstripe/nvstripe/agent/api"
)

// WaitFenced waits until ctx ends (nil) or the mapping of volume name is
// fenced (an error with the cause), looking once a second. It is what
// `nvstripe map` in the foreground waits on.
func (a *Agent) WaitFenced(ctx context.Context, name string) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for _, m := range a.List() {
			if m.Volume == name && m.State == api.StateFenced {
				return fmt.Errorf("volume %s fenced, no longer served: %s", name, m.Error)
			}
		}
	}
}
