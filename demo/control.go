package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/volclient"
)

// Timings of the demo's controller (--chaos only): short, so that a
// stopped target is rebuilt within seconds. `nvstripe controller` defaults
// are 5s of grace and 10 minutes before out.
const (
	demoGrace    = time.Second     // a target silent this long is down
	demoOutAfter = 3 * time.Second // down this long, it is out and rebuilt
	demoInterval = 200 * time.Millisecond
	demoProbe    = 500 * time.Millisecond // TCP probe timeout
	demoTTL      = 3 * time.Second        // leadership lease
)

// startControl runs, for --chaos, the real rebuild machinery in-process: a
// controller.Runner on the demo's etcd (leader election, TCP probes of the
// targets, down after demoGrace, out after demoOutAfter, moves handed to the
// volume's owner as task records) and the mapping's task server
// (Mapped.ServeTasks), which carries those moves out.
func (d *demo) startControl(ctx context.Context) error {
	if !d.o.Chaos {
		return nil
	}
	holder := "demo-controller"
	mover := volclient.NewTaskMover(d.store, volclient.OpenOptions{Holder: holder, LeaseTTL: demoTTL})
	r, err := controller.NewRunner(controller.RunnerConfig{Store: d.store, Holder: holder, Mover: mover,
		Interval: demoInterval, LeaderTTL: demoTTL,
		Decide: decide.Config{OutAfter: demoOutAfter}, Probe: controller.ProbeTCP(demoProbe),
		Health: health.TrackerConfig{Grace: demoGrace}, Logf: d.logf("controller")})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.stopControl = cancel
	d.controlDone = make(chan struct{}, 2)
	go func() { r.Run(cctx); d.controlDone <- struct{}{} }()
	go func() {
		d.mapped.ServeTasks(cctx, d.store, volclient.TaskOptions{Holder: d.holder, Interval: demoInterval,
			ProgressEvery: demoInterval, Logf: d.logf("owner")})
		d.controlDone <- struct{}{}
	}()
	fmt.Fprintf(d.o.Out, "controller: in-process, probing targets over TCP: down after %v of silence, out (and rebuilt) %v later\n",
		demoGrace, demoOutAfter)
	return nil
}

// stopControlLoops stops the controller and the task server and waits.
func (d *demo) stopControlLoops() {
	if d.stopControl == nil {
		return
	}
	d.stopControl()
	<-d.controlDone
	<-d.controlDone
	d.stopControl = nil
}

// logf returns a logger printing "who: line" to the demo's output.
func (d *demo) logf(who string) func(string, ...any) {
	return func(f string, a ...any) {
		fmt.Fprintf(d.o.Out, "%s: %s\n", who, strings.TrimRight(fmt.Sprintf(f, a...), "\n"))
	}
}
