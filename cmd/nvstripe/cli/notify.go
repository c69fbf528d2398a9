package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/nvstripe/nvstripe/internal/retry"
)

// notifyServing tells a supervising systemd (a Type=notify unit, whose
// NOTIFY_SOCKET the process inherits) that the daemon serves: READY=1. It
// then sends WATCHDOG=1 at half the unit's WatchdogSec while ctx lasts, and
// STOPPING=1 as soon as ctx ends (SIGTERM: the daemon begins its orderly
// shutdown). Without NOTIFY_SOCKET it does nothing. A daemon calls it once,
// after its listeners are bound and etcd answered, never before.
func notifyServing(ctx context.Context, log *slog.Logger) {
	if ok, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
		log.Warn("systemd readiness notification failed", "err", err)
		return
	} else if !ok {
		return // not under a Type=notify unit
	}
	context.AfterFunc(ctx, func() {
		if _, err := daemon.SdNotify(false, daemon.SdNotifyStopping); err != nil {
			log.Warn("systemd stopping notification failed", "err", err)
		}
	})
	every, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("systemd watchdog settings", "err", err)
		return
	}
	if every > 0 {
		go pingWatchdog(ctx, every/2)
	}
}

// pingWatchdog sends WATCHDOG=1 every interval until ctx ends.
func pingWatchdog(ctx context.Context, interval time.Duration) {
	retry.Every(ctx, interval, func() { _, _ = daemon.SdNotify(false, daemon.SdNotifyWatchdog) })
}
